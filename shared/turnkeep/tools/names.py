"""The one tool-name rule, shared by function tools, the registry, agents and tool sources:
1-64 characters of `A-Z a-z 0-9 _ -` (what every provider accepts), and a source's name
1-62 of them, since each of its tools is named `<source>_<tool>` (docs/agent.md, docs/mcp.md)."""

from __future__ import annotations

import re
from typing import Final

TOOL_NAME_MAX_LENGTH: Final = 64
SOURCE_NAME_MAX_LENGTH: Final = TOOL_NAME_MAX_LENGTH - 2
"""A source's tools are `<source>_<tool>`: the underscore and at least one character follow."""
TOOL_NAME_PATTERN: Final = r"[A-Za-z0-9_-]{1,64}"
_TOOL_NAME: Final = re.compile(TOOL_NAME_PATTERN)
_RULE: Final = "use 1-64 characters of A-Z a-z 0-9 _ -"


def valid_tool_name(name: object) -> bool:
    """Whether `name` fits every provider's tool-name rule."""
    return isinstance(name, str) and _TOOL_NAME.fullmatch(name) is not None


def tool_name_problem(name: object, what: str = "tool name") -> str | None:
    """Why `name` is not a tool name (`<what> 'x' is invalid: use ...`), or None when it is."""
    if valid_tool_name(name):
        return None
    return f"{what} {name!r} is invalid: {_RULE}"


def source_name_problem(name: object, what: str = "tool source name") -> str | None:
    """Why `name` cannot name a tool source (its tools are `<name>_<tool>`), or None."""
    if valid_tool_name(name) and len(str(name)) <= SOURCE_NAME_MAX_LENGTH:
        return None
    return (
        f"{what} {name!r} is invalid: use 1-{SOURCE_NAME_MAX_LENGTH} characters of "
        "A-Z a-z 0-9 _ - (it prefixes every tool name <source>_<tool>, which providers limit "
        f"to {TOOL_NAME_MAX_LENGTH})"
    )


def source_tool_name(source: str, tool: str) -> str:
    """The name the agent gives tool `tool` of source `source`."""
    return f"{source}_{tool}"
