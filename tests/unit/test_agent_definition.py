"""An `Agent` is checked when it is built: each problem is one `AgentDefinitionError` line
naming it; the demo agent is today's tools and prompt; a turn's settings merge over the agent's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.support import function_tools as ft
from turnkeep import Agent, Tool
from turnkeep.agent import AgentDefinitionError, demo_agent
from turnkeep.providers.settings import ModelSettings
from turnkeep.system_prompt import DEFAULT_SYSTEM_PROMPT


class Source:
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def list_tools(self) -> Sequence[Tool[Any]]:
        return []


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"name": "my agent"}, "agent name 'my agent' is invalid"),
        ({"instructions": "  "}, "instructions must be non-blank text"),
        ({"tools": ft.bare_add}, "tools must be a list"),
        ({"tools": [42]}, "tools takes functions, @tool functions or Tool objects, not int"),
        ({"tools": [ft.bare_add, ft.bare_add]}, "tool name 'bare_add' is used twice"),
        ({"mcp_servers": [object()]}, "mcp_servers takes tool sources"),
        ({"mcp_servers": [Source("docs"), Source("docs")]}, "source name 'docs' is used twice"),
        ({"mcp_servers": [Source("d" * 63)]}, "use 1-62 characters"),
        ({"model_settings": {"temperature": 3}}, "model_settings.temperature: Input should be"),
        ({"model_settings": {"seed": 3}}, "model_settings.seed: Extra inputs are not permitted"),
        ({"turn_settings": ["temperature", "seed"]}, "turn_settings names seed, not model"),
        ({"allowed_models": [""]}, "a model spec must be non-blank text"),
    ],
)
def test_a_bad_definition_is_one_line_naming_the_problem(
    options: dict[str, Any], problem: str
) -> None:
    with pytest.raises(AgentDefinitionError) as raised:
        Agent(**options)

    assert problem in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_demo_agent_is_todays_tools_with_the_default_prompt() -> None:
    agent = demo_agent()

    assert [t.name for t in agent.tools] == ["clock_now", "calculator", "echo"]
    assert agent.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert {agent.tool_source(t.name) for t in agent.tools} == {"builtin"}
    assert agent.model is None
    assert agent.model_settings == ModelSettings()


def test_a_turns_settings_merge_over_the_agents_field_by_field() -> None:
    agent = Agent(model_settings={"temperature": 0.2, "max_tokens": 100, "stop": ["END"]})

    merged = agent.turn_model_settings({"temperature": 0.9})

    assert merged == ModelSettings(temperature=0.9, max_tokens=100, stop=("END",))
    assert agent.turn_model_settings(None) is agent.model_settings


# --- sub-agents (docs/agent.md, "Sub-agents") ---


def test_an_agent_offers_its_sub_agents_as_tools_named_by_as_tool() -> None:
    writer = Agent(name="writer", description="Writes changelogs.")
    triage = Agent(name="triage", agents=[writer, writer.as_tool(name="editor")])

    assert [s.name for s in triage.agents] == ["writer", "editor"]
    assert triage.agents[0].description == "Writes changelogs."
    assert triage.agents[1].agent is writer
    assert triage.tool_source("editor") == "agent"


def test_a_sub_agent_name_outside_the_tool_name_rule_is_refused() -> None:
    writer = Agent(name="writer")

    with pytest.raises(AgentDefinitionError, match="sub-agent name 'bad name'"):
        Agent(name="triage", agents=[writer.as_tool(name="bad name")])


def test_a_sub_agent_named_like_a_tool_is_refused() -> None:
    def writer(x: str) -> str:
        """Write."""
        return x

    with pytest.raises(AgentDefinitionError, match="sub-agent name 'writer' is another tool"):
        Agent(name="triage", tools=[writer], agents=[Agent(name="writer")])


def test_sub_agents_nested_deeper_than_the_limit_are_refused() -> None:
    level3 = Agent(name="c", agents=[Agent(name="d")])
    level2 = Agent(name="b", agents=[level3])

    Agent(name="a", agents=[level2])  # three levels beneath: the default limit
    with pytest.raises(AgentDefinitionError, match="deeper than 2 levels"):
        Agent(name="a", agents=[level2], max_agent_depth=2)
    with pytest.raises(AgentDefinitionError, match="deeper than 3 levels"):
        Agent(name="top", agents=[Agent(name="a", agents=[level2])])


def test_a_sub_agent_cycle_is_refused_when_the_agent_is_defined() -> None:
    inner = Agent(name="triage")
    with pytest.raises(AgentDefinitionError, match=r"cycle \(triage -> helper -> triage\)"):
        Agent(name="triage", agents=[Agent(name="helper", agents=[inner])])


def test_agents_takes_only_agents() -> None:
    with pytest.raises(AgentDefinitionError, match="agents takes Agent objects"):
        Agent(name="triage", agents=["writer"])  # type: ignore[list-item]
