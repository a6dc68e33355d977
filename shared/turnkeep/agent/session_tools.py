"""A session's tool registry from its agent: working-notes tools, the agent's tools, and the
tools its sources list now (the failure rule of a source that cannot list: docs/agent.md)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from turnkeep.agent.definition import Agent
from turnkeep.tools.base import Tool
from turnkeep.tools.names import valid_tool_name
from turnkeep.tools.registry import ToolRegistry
from turnkeep.tools.sources import ToolSource, ToolSourceError

logger = logging.getLogger("turnkeep.agent")


def session_registry(
    agent: Agent, notes: Iterable[Tool[Any]], tools: Iterable[Tool[Any]] | None = None
) -> ToolRegistry:
    """The registry of one session; `tools` replaces the agent's own tools when given (the
    low-level `HarnessDeps.tools` hook). A source that cannot list is in `unavailable`."""
    # Notes tools first: a session tool reusing one of their names is a registry error.
    registry = ToolRegistry(notes, source="notes")
    if tools is None:
        for tool in agent.tools:
            registry.register(tool, source=agent.tool_source(tool.name))
    else:
        registry.extend(tools, source="function")
    for source in agent.mcp_servers:
        add_source(registry, source)
    return registry


def add_source(registry: ToolRegistry, source: ToolSource) -> None:
    """Register what `source` lists now, all or nothing; a failure marks it unavailable."""
    name = source.name
    try:
        listed = list(source.list_tools())
    except ToolSourceError as exc:
        _unavailable(registry, name, str(exc))
        return
    except Exception as exc:  # a source's bug is its failure to list, not the harness's crash
        _unavailable(registry, name, str(ToolSourceError(name, f"{type(exc).__name__}: {exc}")))
        return
    seen: set[str] = set()
    for tool in listed:
        problem = None
        if not isinstance(tool, Tool):
            problem = f"listed a {type(tool).__name__}, not a Tool"
        elif not (tool.name.startswith(f"{name}_") and valid_tool_name(tool.name)):
            problem = f"listed tool {tool.name!r}, not named {name}_<tool> within 64 characters"
        elif tool.name in registry or tool.name in seen:
            problem = f"listed tool {tool.name!r}, whose name another tool of the agent has"
        if problem is not None:
            _unavailable(registry, name, str(ToolSourceError(name, problem)))
            return
        seen.add(tool.name)
    registry.extend(listed, source=f"mcp:{name}")


def _unavailable(registry: ToolRegistry, name: str, error: str) -> None:
    logger.warning("tool source %s unavailable: %s", name, error)
    registry.mark_unavailable(name, error)
