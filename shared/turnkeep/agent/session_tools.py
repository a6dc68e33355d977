"""A session's tool registry from its agent: working-notes tools, the agent's tools, and the
tools its sources list now (the failure rule of a source that cannot list: docs/agent.md)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from turnkeep.agent.definition import Agent
from turnkeep.tools.base import Tool
from turnkeep.tools.names import TOOL_NAME_MAX_LENGTH, valid_tool_name
from turnkeep.tools.registry import ToolRegistry
from turnkeep.tools.sources import ToolSource, ToolSourceError, is_required

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
    """Register what `source` lists now; a failure marks it unavailable (docs/mcp.md,
    "Failures"). A listed tool whose name another tool of the agent has is left out of an
    optional source (the rest register) and makes a required one fail, not retryably."""
    name = source.name
    required = is_required(source)
    try:
        listed = list(source.list_tools())
    except ToolSourceError as exc:
        _unavailable(registry, name, str(exc), required, exc.retryable)
        return
    except Exception as exc:  # a source's bug is its failure to list, not the harness's crash
        message = str(ToolSourceError(name, f"{type(exc).__name__}: {exc}"))
        _unavailable(registry, name, message, required, True)
        return
    kept: list[Tool[Any]] = []
    clashing: list[str] = []
    for tool in listed:
        problem = None
        if not isinstance(tool, Tool):
            problem = f"listed a {type(tool).__name__}, not a Tool"
        elif not (tool.name.startswith(f"{name}_") and valid_tool_name(tool.name)):
            problem = (
                f"listed tool {tool.name!r}, not named {name}_<tool> "
                f"within {TOOL_NAME_MAX_LENGTH} characters"
            )
        if problem is not None:
            _unavailable(registry, name, str(ToolSourceError(name, problem)), required, True)
            return
        if tool.name in registry or any(k.name == tool.name for k in kept):
            clashing.append(tool.name)
            continue
        kept.append(tool)
    if clashing:
        message = str(ToolSourceError(name, "; ".join(_clash(registry, name, t) for t in clashing)))
        if required:
            _unavailable(registry, name, message, required, False)
            return
        logger.info("tool source %s: tools left out: %s", name, message)
        registry.mark_left_out(name, clashing, message)
    registry.extend(kept, source=f"mcp:{name}")


def _clash(registry: ToolRegistry, source: str, tool_name: str) -> str:
    owner = registry.source_of(tool_name) or ""
    other = {
        "function": "the agent's function tool",
        "builtin": "the agent's built-in tool",
        "notes": "the working-notes tool",
    }.get(owner, f"the tool of {owner}" if owner.startswith("mcp:") else "another tool")
    original = tool_name[len(source) + 1 :]
    return (
        f"its tool {original!r}, named {tool_name!r}, clashes with {other} {tool_name!r}: "
        f"rename one, or leave the server's out with deny=[{original!r}]"
    )


def _unavailable(
    registry: ToolRegistry, name: str, error: str, required: bool, retryable: bool
) -> None:
    # An optional source's failure reaches the person as the turn's notice (docs/mcp.md): a
    # warning per listing would repeat it on every step of every turn.
    logger.log(
        logging.WARNING if required else logging.INFO, "tool source %s unavailable: %s", name, error
    )
    registry.mark_unavailable(name, error, required=required, retryable=retryable)
