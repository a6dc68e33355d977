"""One module per kind of tool source; each defines `make() -> ToolSourceHarness`.

The tool-source conformance suite (tests/conformance/test_tool_source_conformance.py) discovers
every module here, so a new kind of source joins the suite by adding its module. Every source
offers the same two tools, as `<prefix>lookup(term: str, limit: int = 2)` (answers
`"<term>: <limit> entries"`) and `<prefix>fail(reason: str = "broken")` (raises `reason`):
tests/support/mcp_servers.py's `build_server` serves them over MCP, and `lookup`/`fail` below
are the same two as function tools.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from turnkeep.tools.registry import ToolRegistry


@dataclass
class ToolSourceHarness:
    """How the suite lists one source's tools into a registry, and takes the source away."""

    name: str
    prefix: str
    """What the source puts before each tool's name (`kb_` for the MCP server `kb`)."""
    registry: Callable[[], ToolRegistry]
    """The source's tools, listed now, in a registry as a turn builds it."""
    unreachable: Callable[[], ToolRegistry] | None = None
    """List a source of this kind that cannot be reached (nothing listening, a command that
    cannot start); None for a kind that cannot be down (function tools are code)."""
    close: Callable[[], None] = field(default=lambda: None)
