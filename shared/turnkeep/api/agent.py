"""`GET /agent`: what the server's agent is — its prompt, models, settings and tools (read-only).

The web console shows it; the shape is fixed (docs/api.md, "The agent"). Tools are listed the
way a turn of the caller's would get them now, tool sources included: a source that cannot list
its tools is in `unavailable_sources` with its error, and the answer is still 200.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from turnkeep.agent import Agent
from turnkeep.agent.definition import OUTPUT_SCHEMA_SETTING
from turnkeep.api.context import Ctx, User
from turnkeep.api.model_choice import allowed_models
from turnkeep.api.models import error_responses

router = APIRouter(tags=["agent"], responses=error_responses(400, 401, 405, 503))

AGENT_VIEW_SESSION = "agent-view"
"""The session id the listed working-notes tools are bound to (never called from here)."""


class AgentTool(BaseModel):
    """One tool a turn is offered."""

    name: str
    description: str
    source: str = Field(description="builtin | notes | function | agent | mcp:<server>")
    requires_approval: bool
    replay_safe: bool
    input_schema: dict[str, Any] = Field(description="the JSON schema of its arguments")


class UnavailableSource(BaseModel):
    """A tool source whose tools could not be listed now."""

    name: str
    error: str


class SubAgentView(BaseModel):
    """A sub-agent the model may call as a tool `{"input": "<task>"}` (docs/agent.md)."""

    name: str = Field(description="the tool name the model calls it by")
    description: str
    agent: str = Field(description="the sub-agent's own name")
    model: str | None = Field(description="its model spec (null: the server's default)")
    tools: list[str] = Field(description="its own function tools and sub-agents, by name")
    sub_agents: list[SubAgentView] = Field(description="its own sub-agents, the same way")
    output_schema: dict[str, Any] | None = Field(
        default=None,
        description="the JSON schema of its typed result, the call's result as JSON "
        "(null: its final text is the result)",
    )


def _sub_agents(agent: Agent) -> list[SubAgentView]:
    return [
        SubAgentView(
            name=sub.name,
            description=sub.description,
            agent=sub.agent.name,
            model=sub.agent.model,
            tools=[t.name for t in sub.agent.tools] + [s.name for s in sub.agent.agents],
            sub_agents=_sub_agents(sub.agent),
            output_schema=sub.agent.output.schema if sub.agent.output is not None else None,
        )
        for sub in agent.agents
    ]


class AgentView(BaseModel):
    """The server's agent (`TURNKEEP_AGENT`, docs/agent.md)."""

    name: str
    description: str
    instructions: str = Field(description="the system prompt the session folds start from")
    model: str = Field(description="the default model spec of a turn")
    allowed_models: list[str] = Field(description="specs a turn may name, the default first")
    model_settings: dict[str, Any] = Field(description="the agent's model settings (set ones)")
    tools: list[AgentTool]
    unavailable_sources: list[UnavailableSource]
    sub_agents: list[SubAgentView] = Field(
        description="the agents it may hand a task to (each also in `tools`, source `agent`)"
    )
    output_schema: dict[str, Any] | None = Field(
        default=None,
        description="the JSON Schema of the agent's typed result (`output_type`), submitted "
        "through the `final_result` tool; null: turns end with text",
    )
    output_retries: int = Field(description="invalid results sent back before a turn fails")
    turn_output_schema: bool = Field(
        description="whether a turn start may pass its own `output_schema`"
    )


def _source(label: str | None) -> str:
    allowed: tuple[Literal["builtin", "notes", "function", "agent"], ...] = (
        "builtin",
        "notes",
        "function",
        "agent",
    )
    if label in allowed or (label is not None and label.startswith("mcp:")):
        return label
    return "function"


@router.get("/agent", response_model=AgentView)
def get_agent(ctx: Ctx, user: User) -> AgentView:
    """The agent this server runs: instructions, models, settings, tools (sources listed now)."""
    deps = ctx.runtime.deps
    agent = deps.agent
    registry = deps.registry(AGENT_VIEW_SESSION, user)
    tools = [
        AgentTool(
            name=tool.name,
            description=tool.description,
            source=_source(registry.source_of(tool.name)),
            requires_approval=tool.requires_approval,
            replay_safe=tool.replay_safe,
            input_schema=spec.input_schema,
        )
        for tool, spec in zip(registry, registry.specs(), strict=True)
    ]
    problems: dict[str, str] = {}  # a source left out whole, or in part (a name clash): once
    for problem in registry.problems:
        problems.setdefault(problem.source, problem.message)
    return AgentView(
        name=agent.name,
        description=agent.description,
        instructions=agent.system_prompt,
        model=ctx.runtime.settings.model,
        allowed_models=allowed_models(ctx),
        model_settings=agent.model_settings.model_dump(mode="json", exclude_none=True),
        tools=tools,
        unavailable_sources=[
            UnavailableSource(name=name, error=error) for name, error in problems.items()
        ],
        sub_agents=_sub_agents(agent),
        output_schema=agent.output.schema if agent.output is not None else None,
        output_retries=agent.output_retries,
        turn_output_schema=OUTPUT_SCHEMA_SETTING in agent.turn_settings,
    )
