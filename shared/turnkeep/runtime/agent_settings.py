"""The agent a process runs, and the default model it implies (TURNKEEP_MODEL wins when set)."""

from __future__ import annotations

from turnkeep.agent.definition import Agent
from turnkeep.runtime.agent_loading import AGENT_ENV, load_agent
from turnkeep.runtime.settings import TurnkeepSettings, model_is_set

FALLBACK_MODEL = "scripted"


def with_agent(
    settings: TurnkeepSettings, *, source: str | None = None, agent: Agent | None = None
) -> tuple[TurnkeepSettings, Agent]:
    """`settings` with `model` resolved, and the agent (`agent`, else the one `settings.agent`
    names).

    The default model of a turn: TURNKEEP_MODEL (or --model) when it names one, else the
    agent's `model`, else `scripted`. ConfigError (one line naming `source`, default
    TURNKEEP_AGENT) when the agent cannot be loaded.
    """
    if agent is None:
        agent = load_agent(settings.agent, source=source or AGENT_ENV)
    if not model_is_set(settings):
        settings = settings.model_copy(update={"model": agent.model or FALLBACK_MODEL})
    return settings, agent
