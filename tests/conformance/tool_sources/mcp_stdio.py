"""An MCP server over stdio in the tool-source conformance suite: the same real server as a
child process (`python -m tests.support.mcp_servers`), listed through `mcp_server`."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conformance.tool_sources import ToolSourceHarness
from turnkeep.mcp import mcp_server
from turnkeep.tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parents[3]


def make() -> ToolSourceHarness:
    source = mcp_server(
        "kb",
        command=sys.executable,
        args=["-m", "tests.support.mcp_servers"],
        cwd=str(ROOT),
        allow=["lookup", "fail"],
    )
    missing = mcp_server("kb", command=str(ROOT / "no-such-mcp-server"), cache_ttl_seconds=0)
    return ToolSourceHarness(
        "mcp_stdio",
        "kb_",
        lambda: ToolRegistry(source.list_tools()),
        unreachable=lambda: ToolRegistry(missing.list_tools()),
    )
