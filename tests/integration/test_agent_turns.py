"""Turns of an `Agent`: its instructions start the system prompt (the persona, notes and skills
folds follow), its function tools and its tool sources' tools run, its model settings (merged
with a turn's allowed override) reach every round as recorded at the turn's start, and a source
that cannot list is left out of a round (the turn says so) unless it is required (the round
fails retryably, waiting with backoff and jitter), and a call of its tool is a tool error."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.integration.turns_support import USER, make_turn_harness
from tests.support import function_tools as ft
from turnkeep import Agent, tool
from turnkeep.agent.definition import AgentDefinitionError
from turnkeep.harness import StartTurnInput, StepInputError, resume_turn, run_turn, start_turn
from turnkeep.harness.source_notices import TOOL_SOURCE_UNAVAILABLE, ToolSourceNotice
from turnkeep.providers.base import ToolResultPart
from turnkeep.providers.settings import ModelSettings
from turnkeep.storage import Entry
from turnkeep.system_prompt import DEFAULT_SYSTEM_PROMPT, resolve_system
from turnkeep.tools.base import Tool
from turnkeep.tools.sources import ToolSourceError

INSTRUCTIONS = "You are the release assistant of ACME. Answer in one sentence."


class FakeSource:
    """A tool source in the test: lists its tools, or fails from its `fail_after`-th listing."""

    def __init__(
        self,
        name: str,
        tools: Sequence[Tool[Any]],
        fail_after: int | None = None,
        *,
        required: bool = False,
        allow: Sequence[str] | None = None,
    ):
        self._name = name
        self.tools = list(tools)
        self.fail_after = fail_after
        self.required = required
        self.allow = allow
        self.listings = 0

    @property
    def name(self) -> str:
        return self._name

    def list_tools(self) -> Sequence[Tool[Any]]:
        self.listings += 1
        if self.fail_after is not None and self.listings > self.fail_after:
            raise ToolSourceError(self._name, "connection refused (127.0.0.1:9)")
        return self.tools


def _search(query: str) -> str:
    """Search the docs."""
    return f"3 pages about {query}"


def _docs(fail_after: int | None = None, *, required: bool = False) -> FakeSource:
    return FakeSource("docs", [tool(name="docs_search")(_search)], fail_after, required=required)


def _notices(h: Any) -> list[Entry]:
    with h.storage() as storage:
        entries = storage.scan_entries(after_seq=None, limit=1000)
    return [e for e in entries if e.type == TOOL_SOURCE_UNAVAILABLE]


def _results(h: Any) -> list[ToolResultPart]:
    return [p for m in h.transcript() for p in m.parts if isinstance(p, ToolResultPart)]


def test_instructions_replace_the_default_prompt_and_the_session_folds_follow_in_order(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = Agent(instructions=INSTRUCTIONS)
    h.envelopes.put_host_meta(
        h.session_id,
        USER,
        {"personaSnapshot": "Be terse.", "attachedSkills": json.dumps(["Skill: haiku"])},
    )

    run_turn(h.deps, h.session_id, USER, "remember the region is eu-west-1")

    round0, round1 = h.provider.requests
    assert round0.system.startswith(INSTRUCTIONS)
    assert DEFAULT_SYSTEM_PROMPT not in round0.system
    assert round1.system == resolve_system(
        INSTRUCTIONS,
        persona="Be terse.",
        notes="the region is eu-west-1",
        skills=["Skill: haiku"],
    )


def test_the_agents_function_tools_run_in_a_turn_and_a_failure_is_a_result_not_a_failed_turn(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = Agent(tools=[ft.async_double, ft.fails, ft.bare_add])

    result = run_turn(
        h.deps,
        h.session_id,
        USER,
        'call async_double {"n": 4}\ncall fails {"reason": "no disk"}\ncall bare_add {"a": 1}',
    )

    assert result.status == "completed"
    assert [(r.content.split(" (call")[0], r.is_error) for r in _results(h)] == [
        ("8", False),
        ("Error: tool fails failed: RuntimeError: no disk", True),
        ("3", False),
    ]
    offered = {t.name for t in h.provider.requests[0].tools}
    assert {"async_double", "fails", "bare_add", "working_notes_get"} <= offered
    assert "calculator" not in offered  # the demo agent's tools are not this agent's


def test_model_settings_reach_every_round_as_recorded_when_the_turn_started(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = Agent(model_settings={"temperature": 0.2, "max_tokens": 2048})
    start_turn(
        h.deps,
        StartTurnInput(
            session_id=h.session_id,
            op_id="op-settings",
            user_id=USER,
            text='call echo {"text": "x"}',
            model_settings={"temperature": 0.7},
        ),
    )
    # The agent changes (a redeploy) before the turn is driven: the turn keeps what it recorded.
    h.deps.agent = Agent(model_settings={"temperature": 1.5})

    result = resume_turn(h.deps, h.session_id, "op-settings")

    assert result.status == "completed"
    assert len(h.provider.requests) == 2
    for request in h.provider.requests:
        assert request.settings == ModelSettings(temperature=0.7, max_tokens=2048)


def test_a_turn_setting_the_agent_does_not_allow_is_refused_before_the_session_is_claimed(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = Agent(turn_settings=["temperature"])

    refused: list[tuple[dict[str, Any], str]] = [
        ({"max_tokens": 5}, r"model_settings\.max_tokens: this agent does not"),
        ({"temperature": 9}, r"model_settings\.temperature: Input should be less"),
    ]
    for settings, message in refused:
        with pytest.raises(StepInputError, match=message):
            start_turn(
                h.deps,
                StartTurnInput(
                    session_id=h.session_id,
                    op_id="op-refused",
                    user_id=USER,
                    text="hi",
                    model_settings=settings,
                ),
            )
    assert "turnStatus" not in h.meta()


def test_a_sources_tools_are_offered_and_called_like_the_agents_own(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)
    source = _docs()
    h.deps.agent = Agent(mcp_servers=[source])

    result = run_turn(h.deps, h.session_id, USER, 'call docs_search {"query": "refunds"}')

    assert result.status == "completed"
    assert "docs_search" in {t.name for t in h.provider.requests[0].tools}
    assert [(r.content, r.is_error) for r in _results(h)] == [("3 pages about refunds", False)]
    assert source.listings >= 3  # each model round and the tool step ask (the source caches)


def test_a_source_that_cannot_list_is_left_out_and_the_turn_goes_on_saying_so_once(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    source = _docs(fail_after=0)
    h.deps.agent = Agent(mcp_servers=[source], tools=[ft.bare_add])
    seen: list[object] = []

    result = run_turn(h.deps, h.session_id, USER, 'call bare_add {"a": 1}', on_event=seen.append)

    assert result.status == "completed"
    assert [(r.content, r.is_error) for r in _results(h)] == [("3", False)]
    assert len(h.provider.requests) == 2  # both rounds ran, without the source's tools
    for request in h.provider.requests:
        assert "docs_search" not in {t.name for t in request.tools}
    (notice,) = _notices(h)  # one per turn and source, though two rounds went without it
    assert notice.data == {
        "op": result.op_id,
        "round": 0,
        "source": "docs",
        "message": "tool source 'docs': connection refused (127.0.0.1:9)",
        "tools": [],
    }
    assert [n for n in seen if isinstance(n, ToolSourceNotice)] == [
        ToolSourceNotice("docs", "tool source 'docs': connection refused (127.0.0.1:9)")
    ]
    assert not any(m.role == "tool_source_unavailable" for m in h.transcript())


def test_a_required_source_that_cannot_list_fails_the_round_retryably_with_backoff_and_jitter(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    source = _docs(fail_after=0, required=True)
    h.deps.agent = Agent(mcp_servers=[source])
    waits: list[float] = []
    caps: list[float] = []
    h.deps.sleep = waits.append
    h.deps.jitter = lambda cap: caps.append(cap) or cap * 0.25

    result = run_turn(h.deps, h.session_id, USER, "hello")

    assert result.status == "failed"
    assert result.error is not None
    assert "tool source 'docs': connection refused" in result.error
    assert source.listings == 1 + h.deps.limits.model_retries  # retried, then failed honestly
    interval = h.deps.limits.model_retry_interval_seconds
    assert caps == [interval, 2 * interval]  # doubled per attempt, as BackoffRate 2.0
    assert waits == [0.25 * interval, 0.5 * interval]  # each wait drawn below its cap
    assert h.provider.requests == []  # no round ran without the source's tools
    assert _notices(h) == []


def test_a_call_of_a_source_that_cannot_list_at_the_tool_step_is_a_tool_error(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = Agent(mcp_servers=[_docs(fail_after=1)], tools=[ft.bare_add])
    # Listed for round 0; the tool step and the next round cannot list: the call is a tool
    # error and the next round goes on without the source.
    result = run_turn(h.deps, h.session_id, USER, 'call docs_search {"query": "refunds"}')

    (call,) = _results(h)
    assert call.is_error
    assert call.content.startswith("Error: tool docs_search is unavailable: tool source 'docs'")
    assert result.status == "completed"
    (notice,) = _notices(h)
    assert notice.data["round"] == 1


def test_a_clashing_tool_of_an_optional_source_is_left_out_naming_both_tools(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    clash = FakeSource("bare", [tool(name="bare_add")(_search), tool(name="bare_sub")(_search)])
    h.deps.agent = Agent(tools=[ft.bare_add], mcp_servers=[clash])

    registry = h.deps.registry(h.session_id, USER)

    assert registry.unavailable == {}
    assert registry.source_of("bare_add") == "function"
    assert registry.source_of("bare_sub") == "mcp:bare"  # the rest of the source registers
    (problem,) = registry.problems
    assert problem.tools == ("bare_add",)
    assert problem.message == (
        "tool source 'bare': its tool 'add', named 'bare_add', clashes with the agent's "
        "function tool 'bare_add': rename one, or leave the server's out with deny=['add']"
    )


def test_a_clash_of_a_required_source_fails_the_turn_at_once_not_retryably(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    clash = FakeSource("bare", [tool(name="bare_add")(_search)], required=True)
    h.deps.agent = Agent(tools=[ft.bare_add], mcp_servers=[clash])
    h.deps.sleep = lambda seconds: pytest.fail(f"a clash was retried (waited {seconds} s)")

    result = run_turn(h.deps, h.session_id, USER, "hello")

    assert result.status == "failed"
    assert result.error == (
        "tool_source_error: tool source 'bare': its tool 'add', named 'bare_add', clashes with "
        "the agent's function tool 'bare_add': rename one, or leave the server's out with "
        "deny=['add']"
    )
    assert clash.listings == 1
    assert h.provider.requests == []


def test_a_clash_an_allow_list_shows_is_a_definition_error_naming_both_tools() -> None:
    grocer = FakeSource("grocer", [], allow=["price", "stock"])

    @tool
    def grocer_price(item: str) -> str:
        """Price an item."""
        return item

    with pytest.raises(AgentDefinitionError) as caught:
        Agent(tools=[grocer_price], mcp_servers=[grocer])

    assert str(caught.value) == (
        "agent 'agent': tool source 'grocer' allows its tool 'price', named 'grocer_price', "
        "which is the function tool 'grocer_price''s name too: rename one, or leave it out of "
        "allow="
    )
    Agent(tools=[grocer_price], mcp_servers=[FakeSource("grocer", [])])  # unknown until listed
