"""An MCP server over Streamable HTTP in the tool-source conformance suite: a real server built
with the `mcp` SDK on 127.0.0.1 (tests/support/mcp_servers.py), listed through `mcp_server`."""

from __future__ import annotations

from tests.conformance.tool_sources import ToolSourceHarness
from tests.support.mcp_servers import HttpMcpServer, free_port
from turnkeep.mcp import mcp_server
from turnkeep.tools.registry import ToolRegistry


def make() -> ToolSourceHarness:
    server = HttpMcpServer("kb").__enter__()
    source = mcp_server("kb", url=server.url, allow=["lookup", "fail"])
    nobody = mcp_server("kb", url=f"http://127.0.0.1:{free_port()}/mcp", cache_ttl_seconds=0)
    return ToolSourceHarness(
        "mcp_http",
        "kb_",
        lambda: ToolRegistry(source.list_tools()),
        unreachable=lambda: ToolRegistry(nobody.list_tools()),
        close=server.__exit__,
    )
