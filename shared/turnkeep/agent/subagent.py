"""Sub-agents: another `Agent` offered to the model as a tool `{"input": "<task>"}`.

A call runs as a child turn of its own (docs/agent.md, "Sub-agents"); this module holds only the
definition side — the name rule, the depth limit and the cycle check made when an agent is
built. The harness runs the call (`turnkeep.harness.subagents`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pydantic import BaseModel, ConfigDict, Field

from turnkeep.tools.names import tool_name_problem

if TYPE_CHECKING:
    from turnkeep.agent.definition import Agent

DEFAULT_MAX_AGENT_DEPTH: Final = 3
"""Levels of sub-agents an agent may have beneath it unless it says otherwise."""

SUBAGENT_INPUT_MAX_CHARS: Final = 100_000
"""The longest task a model may hand a sub-agent (a longer one is a tool error, not a cut)."""


class SubAgentInput(BaseModel):
    """What the model passes a sub-agent: the task, which becomes the child's first user
    message exactly."""

    model_config = ConfigDict(extra="forbid", strict=True)

    input: str = Field(
        min_length=1,
        max_length=SUBAGENT_INPUT_MAX_CHARS,
        description="The task for the sub-agent, in full: it sees nothing else of this "
        "conversation.",
    )


@dataclass(frozen=True, slots=True)
class SubAgent:
    """An agent offered as a tool: `name` (the tool-name rule), `description` (what the model
    reads) and the `agent` whose turn a call runs."""

    name: str
    description: str
    agent: Agent


def as_subagent(owner: str, item: object) -> SubAgent:
    """`item` (an `Agent` or `SubAgent`) as a sub-agent of agent `owner`; `ValueError` (one
    line) for anything else or a name outside the tool-name rule."""
    from turnkeep.agent.definition import Agent

    if isinstance(item, Agent):
        item = item.as_tool()
    if not isinstance(item, SubAgent):
        raise ValueError(
            f"agent {owner!r}: agents takes Agent objects or agent.as_tool(...), "
            f"not {type(item).__name__}"
        )
    problem = tool_name_problem(item.name, "sub-agent name")
    if problem is not None:
        raise ValueError(f"agent {owner!r}: {problem}")
    return item


def subagent_depth(owner: Agent, agents: Sequence[SubAgent], limit: int) -> None:
    """Refuse a cycle (an agent met again on its own path, by identity or name) or a tree
    deeper than `limit` levels beneath `owner`: `ValueError` naming the path."""

    def walk(path: tuple[Agent, ...], children: Sequence[SubAgent]) -> None:
        for sub in children:
            chain = " -> ".join(a.name for a in (*path, sub.agent))
            if any(sub.agent is a or sub.agent.name == a.name for a in path):
                raise ValueError(
                    f"agent {owner.name!r}: sub-agents form a cycle ({chain}): an agent cannot "
                    "call itself, directly or through another"
                )
            if len(path) > limit:
                raise ValueError(
                    f"agent {owner.name!r}: sub-agents nest deeper than {limit} levels "
                    f"({chain}); raise max_agent_depth or flatten them"
                )
            walk((*path, sub.agent), sub.agent.agents)

    walk((owner,), agents)
