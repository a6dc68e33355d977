"""Tool sources: tools listed at run time rather than defined in code (an MCP server's tools).

An agent definition names its sources; the harness asks each for its tools whenever it builds a
session's registry (model step, tool step, an approval's edit check). A source lists and caches by
itself, so asking again is cheap within its cache's lifetime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from turnkeep.tools.base import Tool


class ToolSourceError(Exception):
    """A source could not list its tools (unreachable, refused, a malformed answer).

    The message names the source. The harness treats it as transient: a model round that cannot
    list its tools fails retryably (the step's retry policy, then the turn fails with this text);
    a call of a tool from a source that cannot be listed is a tool error result.
    """

    def __init__(self, source: str, message: str) -> None:
        super().__init__(f"tool source {source!r}: {message}")
        self.source = source


@runtime_checkable
class ToolSource(Protocol):
    """Something that lists tools at run time; every tool it lists is named `<name>_<tool>`."""

    @property
    def name(self) -> str:
        """The source's name: the prefix of its tools' names ([A-Za-z0-9_-], 1-64 in all)."""
        ...

    def list_tools(self) -> Sequence[Tool[Any]]:
        """The source's tools (cached by the source); raises ToolSourceError when it cannot."""
        ...
