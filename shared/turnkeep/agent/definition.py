"""`Agent`: the one definition of what a turn runs — instructions, tools, tool sources, model.

An agent is checked when it is built: every problem (a tool name used twice or reusing a
working-notes tool's, a bad name, settings a model would refuse) is one `AgentDefinitionError`
line. `demo_agent()` is what runs when `TURNKEEP_AGENT` is unset. docs/agent.md is the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from turnkeep.agent.function_tool import ToolDefinitionError, function_tool
from turnkeep.agent.output import (
    DEFAULT_OUTPUT_RETRIES,
    FINAL_RESULT_TOOL,
    OutputSpec,
    output_spec,
)
from turnkeep.agent.subagent import (
    DEFAULT_MAX_AGENT_DEPTH,
    SubAgent,
    as_subagent,
    subagent_depth,
)
from turnkeep.definition_errors import AgentDefinitionError
from turnkeep.notes.tools import WORKING_NOTES_TOOL_NAMES
from turnkeep.providers.settings import ModelSettings
from turnkeep.spend.budgets import Budgets, budgets_of
from turnkeep.system_prompt import DEFAULT_SYSTEM_PROMPT
from turnkeep.tools.base import READ_TOOL_RESULT, Tool
from turnkeep.tools.names import source_name_problem, source_tool_name, tool_name_problem
from turnkeep.tools.sources import ToolSource, declared_tools

DEFAULT_TURN_SETTINGS: tuple[str, ...] = ("max_tokens", "temperature", "top_p", "stop")
"""Model settings a turn may override unless the agent says otherwise (never `extra`, which
passes provider fields through unchecked, nor `tool_choice`, unless the agent allows them)."""
OUTPUT_SCHEMA_SETTING = "output_schema"
"""The `turn_settings` name that lets a turn start pass its own `output_schema`."""


def _settings(name: str, value: ModelSettings | Mapping[str, Any] | None) -> ModelSettings:
    if value is None:
        return ModelSettings()
    if isinstance(value, ModelSettings):
        return value
    if not isinstance(value, Mapping):
        raise AgentDefinitionError(
            f"agent {name!r}: model_settings must be a dict or ModelSettings, "
            f"not {type(value).__name__}"
        )
    try:
        return ModelSettings.model_validate(dict(value))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise AgentDefinitionError(
            f"agent {name!r}: model_settings.{where}: {first['msg']}"
        ) from None


def _as_tool(agent: str, item: object) -> Tool[Any]:
    if isinstance(item, Tool):
        return item
    if callable(item):
        try:
            return function_tool(item)
        except ToolDefinitionError as exc:
            raise AgentDefinitionError(f"agent {agent!r}: {exc}") from None
    raise AgentDefinitionError(
        f"agent {agent!r}: tools takes functions, @tool functions or Tool objects, "
        f"not {type(item).__name__}"
    )


def _check_declared_names(agent: str, tool_names: set[str], sources: Sequence[ToolSource]) -> None:
    """The clashes visible in the definition: a source with an allow list names the tools it
    may list, so `<source>_<tool>` for each is known now and must be no other tool's name (a
    source without one is checked when it is listed: docs/mcp.md, "Names")."""
    owners: dict[str, str] = {t: f"the function tool {t!r}" for t in tool_names}
    for source in sources:
        for original in sorted(declared_tools(source) or ()):
            final = source_tool_name(source.name, original)
            other = owners.get(final)
            if other is not None:
                raise AgentDefinitionError(
                    f"agent {agent!r}: tool source {source.name!r} allows its tool "
                    f"{original!r}, named {final!r}, which is {other}'s name too: rename one, "
                    "or leave it out of allow="
                )
            owners[final] = f"tool {original!r} of source {source.name!r}"


def _subagents(
    agent: str,
    agents: Sequence[Agent | SubAgent],
    tool_names: set[str],
    sources: Sequence[ToolSource],
    max_depth: int,
) -> tuple[SubAgent, ...]:
    """The sub-agents, each named by the tool-name rule and no tool's or source's name."""
    if isinstance(agents, (str, bytes)) or not isinstance(agents, Sequence):
        raise AgentDefinitionError(f"agent {agent!r}: agents must be a list")
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
        raise AgentDefinitionError(f"agent {agent!r}: max_agent_depth must be an integer >= 0")
    subs: list[SubAgent] = []
    taken = set(tool_names) | WORKING_NOTES_TOOL_NAMES | {READ_TOOL_RESULT}
    declared = {source_tool_name(s.name, t) for s in sources for t in (declared_tools(s) or ())}
    for item in agents:
        try:
            sub = as_subagent(agent, item)
        except ValueError as exc:
            raise AgentDefinitionError(str(exc)) from None
        if sub.name in taken or sub.name in declared:
            raise AgentDefinitionError(
                f"agent {agent!r}: sub-agent name {sub.name!r} is another tool's name too: "
                "rename one (agent.as_tool(name=...))"
            )
        taken.add(sub.name)
        subs.append(sub)
    return tuple(subs)


def _check_texts(name: str, description: object, instructions: object) -> None:
    """The agent's name (the tool-name rule), description and instructions."""
    problem = tool_name_problem(name, "agent name")
    if problem is not None:
        raise AgentDefinitionError(problem)
    if not isinstance(description, str):
        raise AgentDefinitionError(f"agent {name!r}: description must be text")
    if instructions is not None and (not isinstance(instructions, str) or not instructions.strip()):
        raise AgentDefinitionError(
            f"agent {name!r}: instructions must be non-blank text (None keeps the default "
            "system prompt)"
        )


def _check_tool_name(agent: str, tool_name: str, seen: set[str]) -> None:
    """A tool's name: the rule, not a built-in tool's, not used twice in the agent."""
    problem = tool_name_problem(tool_name)
    if problem is not None:
        raise AgentDefinitionError(f"agent {agent!r}: {problem}")
    if tool_name in WORKING_NOTES_TOOL_NAMES:
        raise AgentDefinitionError(
            f"agent {agent!r}: tool name {tool_name!r} is a working-notes tool's (always "
            f"offered: {', '.join(sorted(WORKING_NOTES_TOOL_NAMES))}); rename it"
        )
    if tool_name == FINAL_RESULT_TOOL:
        raise AgentDefinitionError(
            f"agent {agent!r}: tool name {tool_name!r} is the tool a typed result is "
            "submitted through; rename it"
        )
    if tool_name == READ_TOOL_RESULT:
        raise AgentDefinitionError(
            f"agent {agent!r}: tool name {tool_name!r} is the always-on tool that reads "
            "long tool results; rename it"
        )
    if tool_name in seen:
        raise AgentDefinitionError(f"agent {agent!r}: tool name {tool_name!r} is used twice")


def _check_tools(agent: str, tools: object) -> tuple[Tool[Any], ...]:
    """The agent's tools as `Tool` objects, each name valid and used once."""
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise AgentDefinitionError(f"agent {agent!r}: tools must be a list")
    built = tuple(_as_tool(agent, item) for item in tools)
    seen: set[str] = set()
    for t in built:
        _check_tool_name(agent, t.name, seen)
        seen.add(t.name)
    return built


def _check_sources(agent: str, mcp_servers: Sequence[object]) -> tuple[ToolSource, ...]:
    """The agent's tool sources, each a `ToolSource` with a valid name used once."""
    checked: list[ToolSource] = []
    names: set[str] = set()
    for source in mcp_servers:
        if not isinstance(source, ToolSource):
            raise AgentDefinitionError(
                f"agent {agent!r}: mcp_servers takes tool sources (turnkeep.mcp_server(...) "
                f"or a turnkeep.tools.sources.ToolSource), not {type(source).__name__}"
            )
        problem = source_name_problem(source.name)
        if problem is not None:
            raise AgentDefinitionError(f"agent {agent!r}: {problem}")
        if source.name in names:
            raise AgentDefinitionError(
                f"agent {agent!r}: tool source name {source.name!r} is used twice"
            )
        names.add(source.name)
        checked.append(source)
    return tuple(checked)


def _check_models(agent: str, model: object, allowed_models: Sequence[object]) -> None:
    """The default model spec and the allowed ones: non-blank text (None: no default)."""
    for spec in (model, *allowed_models):
        if spec is not None and (not isinstance(spec, str) or not spec.strip()):
            raise AgentDefinitionError(f"agent {agent!r}: a model spec must be non-blank text")


def _check_turn_settings(agent: str, turn_settings: Collection[str]) -> None:
    """The settings a turn may override: names of `ModelSettings` fields."""
    unknown = sorted(set(turn_settings) - set(ModelSettings.model_fields) - {OUTPUT_SCHEMA_SETTING})
    if unknown:
        raise AgentDefinitionError(
            f"agent {agent!r}: turn_settings names {', '.join(unknown)}, not model settings "
            f"(known: {', '.join(ModelSettings.model_fields)}, {OUTPUT_SCHEMA_SETTING})"
        )


def _output(name: str, output_type: object, retries: object) -> OutputSpec | None:
    """The agent's output as a spec (None: turns end with text); its retries a count >= 0."""
    if type(retries) is not int or retries < 0:
        raise AgentDefinitionError(
            f"agent {name!r}: output_retries must be a whole number >= 0, not {retries!r}"
        )
    try:
        return output_spec(output_type)
    except Exception as exc:  # pydantic raises several kinds for a type it cannot take
        raise AgentDefinitionError(
            f"agent {name!r}: output_type {output_type!r} has no JSON schema: {exc}"
        ) from None


class Agent:
    """What a turn runs: instructions, tools, tool sources (MCP servers) and model settings.

    `instructions` replace the default system prompt (the persona, working-notes and skills
    folds still follow, docs/envelope.md); None keeps the default. `tools` are plain functions,
    `@tool` functions or `Tool` objects. `mcp_servers` are tool sources listed when a session's
    tools are built. `model` is the default model spec when `TURNKEEP_MODEL` is unset;
    `allowed_models` are the specs a turn may pick besides the default (joined with
    `TURNKEEP_ALLOWED_MODELS`). `model_settings` apply to every round; `turn_settings` names the
    settings a turn may override. `deps` is what tools get as `ToolContext.deps`: an object, or
    a zero-argument factory (function, class, partial) each process calls once (docs/agent.md).
    `output_type` (a pydantic model, TypedDict, dataclass, list or union) makes every turn end
    with a validated object submitted through the `final_result` tool; an invalid one goes back
    to the model up to `output_retries` times, then the turn fails `output_invalid`.
    """

    __slots__ = (
        "agents",
        "allowed_models",
        "budgets",
        "builtin_names",
        "deps",
        "description",
        "instructions",
        "max_agent_depth",
        "mcp_servers",
        "model",
        "model_settings",
        "name",
        "output",
        "output_retries",
        "tools",
        "turn_settings",
    )

    def __init__(
        self,
        *,
        name: str = "agent",
        description: str = "",
        instructions: str | None = None,
        tools: Sequence[Tool[Any] | Callable[..., Any]] = (),
        mcp_servers: Sequence[ToolSource] = (),
        model: str | None = None,
        allowed_models: Sequence[str] = (),
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
        turn_settings: Collection[str] = DEFAULT_TURN_SETTINGS,
        budgets: Budgets | Mapping[str, Any] | None = None,
        deps: object = None,
        agents: Sequence[Agent | SubAgent] = (),
        max_agent_depth: int = DEFAULT_MAX_AGENT_DEPTH,
        output_type: object = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        _builtin: Collection[str] = (),  # the demo agent's: labelled `builtin` on GET /agent
    ) -> None:
        _check_texts(name, description, instructions)
        built = _check_tools(name, tools)
        sources = _check_sources(name, mcp_servers)
        _check_declared_names(name, {t.name for t in built}, sources)
        subs = _subagents(name, agents, {t.name for t in built}, sources, max_agent_depth)
        _check_models(name, model, allowed_models)
        _check_turn_settings(name, turn_settings)
        output = _output(name, output_type, output_retries)
        self.name = name
        self.description = description
        self.instructions = instructions
        self.tools: tuple[Tool[Any], ...] = built
        self.mcp_servers: tuple[ToolSource, ...] = sources
        self.model = model
        self.allowed_models: tuple[str, ...] = tuple(allowed_models)
        self.model_settings = _settings(name, model_settings)
        self.turn_settings: frozenset[str] = frozenset(turn_settings)
        self.budgets: Budgets | None = _budgets(name, budgets)
        self.builtin_names: frozenset[str] = frozenset(_builtin)
        self.deps = deps
        self.agents: tuple[SubAgent, ...] = subs
        self.max_agent_depth = max_agent_depth
        try:
            subagent_depth(self, subs, max_agent_depth)
        except ValueError as exc:
            raise AgentDefinitionError(str(exc)) from None
        self.output: OutputSpec | None = output
        self.output_retries = output_retries

    def __repr__(self) -> str:
        return (
            f"Agent(name={self.name!r}, tools={[t.name for t in self.tools]}, "
            f"mcp_servers={[s.name for s in self.mcp_servers]}, model={self.model!r})"
        )

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> SubAgent:
        """This agent as a sub-agent of another: a tool `{"input": "<task>"}` named `name`
        (default the agent's name), described by `description` (default its description)."""
        text = description if description is not None else self.description
        return SubAgent(
            name=name if name is not None else self.name,
            description=text or f"Hand a task to the {self.name} agent; it returns its answer.",
            agent=self,
        )

    @property
    def system_prompt(self) -> str:
        """The prompt the folds start from: the instructions, else the default prompt."""
        return self.instructions if self.instructions is not None else DEFAULT_SYSTEM_PROMPT

    def tool_source(self, tool_name: str) -> str:
        """Where a tool of this agent comes from: `builtin`, `function` or `agent` (a
        sub-agent; console label)."""
        if any(sub.name == tool_name for sub in self.agents):
            return "agent"
        return "builtin" if tool_name in self.builtin_names else "function"

    def turn_model_settings(self, override: Mapping[str, Any] | None) -> ModelSettings:
        """The agent's settings with a turn's override on top; ValueError (one line naming the
        field) for a setting the agent does not let a turn change or a value it refuses."""
        if not override:
            return self.model_settings
        refused = sorted(set(override) - self.turn_settings)
        if refused:
            allowed = ", ".join(sorted(self.turn_settings)) or "(none)"
            raise ValueError(
                f"model_settings.{refused[0]}: this agent does not let a turn set it "
                f"(a turn may set: {allowed})"
            )
        try:
            turn = ModelSettings.model_validate(dict(override))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"model_settings.{where}: {first['msg']}") from None
        return self.model_settings.merged(turn)

    def turn_output(self, output_schema: object | None) -> OutputSpec | None:
        """The output a turn must end with: its own `output_schema` where the agent allows it
        (`turn_settings` naming `output_schema`), else the agent's; ValueError saying why a
        schema is refused (OutputSchemaError is one)."""
        if output_schema is None:
            return self.output
        if OUTPUT_SCHEMA_SETTING not in self.turn_settings:
            raise ValueError(
                "output_schema: this agent does not let a turn set it (its turn_settings do "
                f"not name {OUTPUT_SCHEMA_SETTING!r})"
            )
        return OutputSpec.from_schema(output_schema)


def demo_agent() -> Agent:
    """turnkeep's demo agent: clock_now, calculator and echo, with the default prompt."""
    from turnkeep.tools.builtin import builtin_tools

    tools = builtin_tools()
    return Agent(
        name="demo",
        description="turnkeep's demo agent: a clock, a calculator and an echo tool.",
        tools=tools,
        _builtin=[t.name for t in tools],
    )


def _budgets(name: str, value: Budgets | Mapping[str, Any] | None) -> Budgets | None:
    """The agent's spend budgets (docs/usage.md, "Budgets"); a bad one names the agent."""
    try:
        return budgets_of(dict(value) if isinstance(value, Mapping) else value)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise AgentDefinitionError(f"agent {name!r}: budgets.{where}: {error['msg']}") from exc
