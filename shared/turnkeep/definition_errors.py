"""The error of a definition a turn runs (an agent, an MCP server it names): here, below both
`agent` and `mcp`, so the tool sources need not import the agent package (docs/agent.md)."""

from __future__ import annotations


class AgentDefinitionError(ValueError):
    """An agent definition is not accepted; `str()` is the one line to show."""
