"""A sub-agent's child turn reaches the parent turn's WebSocket subscribers under moto: the
template's definition executed by moto's Step Functions, the child turn as an execution of its
own, the real `subscribe` handler of functions/live/ and moto's management API recording what
each connection was sent. The child's steps find the parent's subscription from the child
session's link and push its events nested under the call, before the parent's result
(docs/api.md, "Sub-agent events")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.test_state_machine_websocket import (
    ENDPOINT,
    _execute,
    _start,
    _subscribe,
    sent,
)
from tests.support.lambda_host import load_function_module
from tests.support.state_machine import USER, Deployed, deploy
from turnkeep.aws_lambda import container
from turnkeep.harness.subagents import child_ids
from turnkeep.runtime.agent_loading import forget_agents

AGENT = "tests.support.subagent_agents:agent"
RESEARCH = "call research " + json.dumps({"input": 'call count_words {"text": "a b c"}'})


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    with deploy(monkeypatch, "STANDARD", TURNKEEP_WS_ENDPOINT=ENDPOINT) as deployed:
        monkeypatch.setenv("TURNKEEP_AGENT", AGENT)
        # As template.yaml sets them (the tool step's ARN names the stack's own machine).
        monkeypatch.setenv("TURNKEEP_CHILD_TURNS", "execution")
        monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", deployed.state_machine_arn)
        forget_agents()
        container.reset_runtime()
        yield deployed
        container.reset_runtime()


def _is_parent_result(message: dict[str, Any]) -> bool:
    data = message["data"]
    return message["event"] == "entry" and data.get("role") == "tool" and not data.get("nested")


def _calls(message: dict[str, Any]) -> list[str]:
    return [p["name"] for p in message["data"].get("parts") or [] if p["kind"] == "tool_call"]


def test_a_child_turn_s_steps_push_its_events_nested_to_the_parent_s_subscriber(
    stack: Deployed,
) -> None:
    app = load_function_module("live")
    session, op_id = "ws-sub", "op-wssub-0001"
    _start(session, op_id, RESEARCH)
    _subscribe(app, "conn-parent", USER, session, op_id)
    _execute(stack, session, op_id)

    got = sent("conn-parent")
    assert got[-1]["event"] == "end"
    assert got[-1]["data"]["status"] == "completed"
    nested = [m for m in got if m["data"].get("nested")]
    result_at = next(i for i, m in enumerate(got) if _is_parent_result(m))
    (result,) = got[result_at]["data"]["parts"]
    child_session, child_op = child_ids(session, op_id, result["call_id"])
    assert {
        (n["agent"], n["session_id"], n["op_id"], n["depth"], n["call_id"])
        for m in nested
        for n in m["data"]["nested"]
    } == {("research", child_session, child_op, 1, result["call_id"])}
    # The child's own tool call and result, pushed by its execution's steps, come first.
    child_call_at = next(
        i for i, m in enumerate(got) if m["data"].get("nested") and _calls(m) == ["count_words"]
    )
    child_result_at = next(
        i
        for i, m in enumerate(got)
        if m["data"].get("nested") and m["event"] == "entry" and m["data"].get("role") == "tool"
    )
    assert child_call_at < child_result_at < result_at
    assert result["content"] == "Tool count_words returned: 3"
    # Nested entries are pushed once each (per child seq), the parent's own in seq order.
    child_entries = [m["id"] for m in nested if m["event"] == "entry"]
    assert len(child_entries) == len(set(child_entries))
    own = [m["id"] for m in got if m["id"] is not None and not m["data"].get("nested")]
    assert own == sorted(set(own))


def test_a_subscribe_after_the_child_ran_gets_its_events_nested_in_the_catch_up(
    stack: Deployed,
) -> None:
    app = load_function_module("live")
    session, op_id = "ws-sub-late", "op-wssub-0002"
    _start(session, op_id, RESEARCH)
    _execute(stack, session, op_id)
    _subscribe(app, "conn-late", USER, session, op_id)

    got = sent("conn-late")
    assert got[-1]["event"] == "end"
    result_at = next(i for i, m in enumerate(got) if _is_parent_result(m))
    child_call_at = next(
        i for i, m in enumerate(got) if m["data"].get("nested") and _calls(m) == ["count_words"]
    )
    assert child_call_at < result_at
