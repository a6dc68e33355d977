"""`TURNKEEP_AGENT=package.module:attribute`: find the agent every entry point runs.

An empty reference is the demo agent. Anything that keeps the reference from naming an
`Agent` (a malformed reference, a module that is missing or fails to import, a missing
attribute, something else than an `Agent`, an agent definition error) is one `ConfigError`
line naming the variable or flag and the reference. Loaded agents are cached per reference.
"""

from __future__ import annotations

import importlib
import re
import threading

from turnkeep.agent.definition import Agent, demo_agent
from turnkeep.agent.function_tool import ToolDefinitionError
from turnkeep.definition_errors import AgentDefinitionError
from turnkeep.runtime.config_errors import ConfigError, config_problem

AGENT_ENV = "TURNKEEP_AGENT"
_REF = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_LOCK = threading.Lock()
_CACHE: dict[str, Agent] = {}


def load_agent(reference: str, *, source: str = AGENT_ENV) -> Agent:
    """The agent `reference` names ("" = the demo agent); ConfigError naming `source`."""
    reference = reference.strip()
    with _LOCK:
        found = _CACHE.get(reference)
        if found is None:
            found = _CACHE[reference] = _load(reference, source)
        return found


def _load(reference: str, source: str) -> Agent:
    if not reference:
        return demo_agent()

    def problem(text: str) -> ConfigError:
        return ConfigError(config_problem(source, reference, text))

    if not _REF.match(reference):
        raise problem("expected package.module:attribute, e.g. turnkeep_agents.my_agent:agent")
    module_name, attribute = reference.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except (AgentDefinitionError, ToolDefinitionError) as exc:
        raise problem(f"the agent definition is not accepted: {exc}") from None
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise problem(
                f"no module named {exc.name!r} (agents live in shared/turnkeep_agents/, "
                "docs/agent.md)"
            ) from None
        raise problem(f"importing {module_name} failed: {type(exc).__name__}: {exc}") from None
    except Exception as exc:
        raise problem(f"importing {module_name} failed: {type(exc).__name__}: {exc}") from None
    target: object = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise problem(f"module {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not isinstance(target, Agent):
        raise problem(f"{attribute} is a {type(target).__name__}, not a turnkeep.Agent")
    return target


def forget_agents() -> None:
    """Drop the cache (tests that load a changed module again)."""
    with _LOCK:
        _CACHE.clear()
