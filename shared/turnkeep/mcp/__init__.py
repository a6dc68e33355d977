"""MCP servers as tool sources of an agent (docs/mcp.md); `mcp` itself is imported lazily."""

from turnkeep.mcp.source import McpDefinitionError, McpServer, mcp_server

__all__ = ["McpDefinitionError", "McpServer", "mcp_server"]
