"""turnkeep: durable AI-agent turns on AWS serverless.

`from turnkeep import Agent, tool` is the public way to define an agent (docs/agent.md). The
names load on first use, so `import turnkeep.<module>` alone (a Lambda handler) pays nothing
for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from turnkeep.agent import Agent, tool
    from turnkeep.mcp import mcp_server
    from turnkeep.tools.base import Tool, ToolContext, ToolResult
    from turnkeep.tools.images import Image

_EXPORTS = {
    "Agent": "turnkeep.agent",
    "tool": "turnkeep.agent",
    "mcp_server": "turnkeep.mcp",
    "Tool": "turnkeep.tools.base",
    "ToolContext": "turnkeep.tools.base",
    "ToolResult": "turnkeep.tools.base",
    "Image": "turnkeep.tools.images",
}

__all__ = [
    "Agent",
    "Image",
    "Tool",
    "ToolContext",
    "ToolResult",
    "__version__",
    "mcp_server",
    "tool",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'turnkeep' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
