"""Tool sources: tools listed at run time rather than defined in code (an MCP server's tools).

An agent definition names its sources; the harness asks each for its tools whenever it builds a
session's registry (model step, tool step, an approval's edit check). A source lists and caches by
itself, so asking again is cheap within its cache's lifetime.

The failure rule (docs/mcp.md, "Failures"): a source is optional unless it says
`required = True`. A model round leaves an optional source that cannot be listed out of that
round's tools and goes on, and the turn's events say so (a `tool_source_unavailable` event); a
required one fails the round (retryably, unless the error says it is not). Either way a call of
a tool of a source that cannot be listed is a tool error result.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol, runtime_checkable

from turnkeep.tools.base import Tool


class ToolSourceError(Exception):
    """A source could not list its tools (unreachable, refused, a malformed answer).

    The message names the source. `retryable` (default True): asking again may succeed, so a
    required source's failure fails the model round retryably (the step's retry policy, with
    backoff; then the turn fails with this text). False: asking again cannot help (a tool name
    that clashes with another tool of the agent): the turn fails at once.
    """

    def __init__(self, source: str, message: str, *, retryable: bool = True) -> None:
        super().__init__(f"tool source {source!r}: {message}")
        self.source = source
        self.retryable = retryable


@runtime_checkable
class ToolSource(Protocol):
    """Something that lists tools at run time; every tool it lists is named `<name>_<tool>`.

    Optional attributes, read with `getattr`: `required` (bool, default False: the failure
    rule above) and `allow` (the tool names, without the prefix, it may list; None: any), which
    lets an agent check name clashes when it is defined.
    """

    @property
    def name(self) -> str:
        """The source's name: the prefix of its tools' names ([A-Za-z0-9_-], 1-62)."""
        ...

    def list_tools(self) -> Sequence[Tool[Any]]:
        """The source's tools (cached by the source); raises ToolSourceError when it cannot."""
        ...


def is_required(source: ToolSource) -> bool:
    """Whether a round must fail when `source` cannot be listed (its `required`, else False)."""
    return getattr(source, "required", False) is True


def declared_tools(source: ToolSource) -> Collection[str] | None:
    """The tool names (without the prefix) `source` says it may list, or None when it does not
    say (its `allow` list)."""
    allow = getattr(source, "allow", None)
    if allow is None or isinstance(allow, str) or not isinstance(allow, Collection):
        return None
    return allow
