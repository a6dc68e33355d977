"""Function tools (`@turnkeep.tool`) in the tool-source conformance suite: in-process."""

from __future__ import annotations

from tests.conformance.tool_sources import ToolSourceHarness
from turnkeep import tool
from turnkeep.tools.registry import ToolRegistry


@tool
def lookup(term: str, limit: int = 2) -> str:
    """Look a term up in the knowledge base."""
    return f"{term}: {limit} entries"


@tool
def fail(reason: str = "broken") -> str:
    """Always fails."""
    raise ValueError(reason)


def make() -> ToolSourceHarness:
    return ToolSourceHarness("function_tools", "", lambda: ToolRegistry([lookup, fail]))


LOCAL = True
"""Defined in code, never out of reach: the tests of an unreachable source do not apply."""
