"""Agent definitions: `Agent`, `tool`, and `TURNKEEP_AGENT` loading (docs/agent.md)."""

from turnkeep.agent.definition import DEFAULT_TURN_SETTINGS, Agent, demo_agent
from turnkeep.agent.function_tool import FunctionTool, ToolDefinitionError, function_tool, tool
from turnkeep.definition_errors import AgentDefinitionError

__all__ = [
    "DEFAULT_TURN_SETTINGS",
    "Agent",
    "AgentDefinitionError",
    "FunctionTool",
    "ToolDefinitionError",
    "demo_agent",
    "function_tool",
    "tool",
]
