"""Every sample event in events/turn_steps/ drives its real handler (functions/turn_steps/app.py)
under moto, in the order the state machine sends them, so the samples cannot go stale."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest

from tests.support.aws_template import load_template
from tests.support.lambda_env import lambda_deployment
from tests.support.lambda_host import ROOT, FakeContext, load_function_module
from turnkeep.aws_lambda import container
from turnkeep.aws_lambda.step_events import RetryableStepError, StepEventError
from turnkeep.harness import StartTurnInput, start_turn
from turnkeep.harness.state import load_state
from turnkeep.providers.base import ModelRequest, StreamEvent
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings
from turnkeep.storage import open_storage

EVENTS = ROOT / "events" / "turn_steps"
TABLE = "turnkeep-sessions"
BUCKET = "turnkeep-progress"


def _event(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))
    return data


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    with lambda_deployment(monkeypatch, TABLE, BUCKET):
        yield load_function_module("turn_steps")


def _start(text: str) -> None:
    execution = _event("execution_input")
    deps = container.runtime().deps
    deps.envelopes.create(execution["session_id"], "user-1")
    start_turn(
        deps,
        StartTurnInput(
            session_id=execution["session_id"],
            op_id=execution["op_id"],
            user_id="user-1",
            text=text,
        ),
    )


def _call(app: ModuleType, handler: str, event: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = getattr(app, handler)(event, FakeContext(function_name=handler))
    return result


def test_the_sample_events_cover_every_task_of_the_state_machine() -> None:
    definition = (ROOT / "statemachine" / "turn.asl.json").read_text(encoding="utf-8")
    names = {p.stem for p in EVENTS.glob("*.json")}
    assert names == {"execution_input", "model_step", "tool_step", "finish_turn", "fail_turn"}
    for placeholder in ("ModelStep", "ToolStep", "FinishTurn", "FailTurn"):
        assert "${" + placeholder + "FunctionArn}" in definition


def test_the_sample_events_drive_a_turn_from_first_round_to_finish(app: ModuleType) -> None:
    _start('call echo {"text": "from a sample event"}')

    first = _call(app, "model_step", _event("model_step"))
    assert first["next"] == "tools"
    assert first["call_ids"] == [_event("tool_step")["call_id"]]

    tool = _call(app, "tool_step", _event("tool_step"))
    assert tool["status"] == "done"
    assert tool["is_error"] is False

    second = _call(app, "model_step", {**_event("model_step"), "round": first["next_round"]})
    assert second["next"] == "finish"

    result = _call(app, "finish_turn", _event("finish_turn"))
    assert result["status"] == "completed"
    # A duplicate delivery of the terminal step returns the same outcome.
    assert _call(app, "finish_turn", _event("finish_turn"))["status"] == "completed"


def test_the_sample_catch_payload_fails_the_turn_with_the_lambdas_own_message(
    app: ModuleType,
) -> None:
    _start("hello")

    result = _call(app, "fail_turn", _event("fail_turn"))

    assert result["status"] == "failed"
    assert result["error"] == "RuntimeError: tool host unreachable"


def test_a_payload_missing_its_ids_is_rejected_as_a_wiring_error_not_retried(
    app: ModuleType,
) -> None:
    with pytest.raises(StepEventError, match="ModelStepInput"):
        _call(app, "model_step", {"session_id": "demo-session"})
    with pytest.raises(StepEventError, match="ModelStepInput"):
        _call(app, "model_step", {"session_id": "demo-session", "op_id": "op-x", "round": -1})


def test_storage_contention_surfaces_as_a_retryable_step_error(
    app: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from turnkeep.aws_lambda import step_events
    from turnkeep.storage import StorageConflictError

    _start("hello")

    def contended(*args: Any, **kwargs: Any) -> Any:
        raise StorageConflictError("the sequence head moved 10 times")

    monkeypatch.setattr(step_events, "model_step", contended)
    with pytest.raises(RetryableStepError, match="head moved"):
        _call(app, "model_step", _event("model_step"))


def test_sample_events_are_plain_json_objects() -> None:
    for path in EVENTS.glob("*.json"):
        assert isinstance(json.loads(Path(path).read_text(encoding="utf-8")), dict), path


def test_a_fail_step_from_the_model_with_a_null_error_still_ends_the_turn(
    app: ModuleType,
) -> None:
    # FailTurnFromModel passes `$.model.error`, which the model step may leave null.
    _start("hello")

    execution = _event("execution_input")
    result = _call(
        app,
        "fail_turn",
        {"session_id": execution["session_id"], "op_id": execution["op_id"], "error": None},
    )

    assert result["status"] == "failed"
    assert result["error"] == "the turn failed"


def test_a_tool_step_payload_without_its_round_is_still_accepted(app: ModuleType) -> None:
    # Executions started before the Map passed `round` deliver the older payload shape.
    _start('call echo {"text": "old payload"}')
    _call(app, "model_step", _event("model_step"))

    legacy = {k: v for k, v in _event("tool_step").items() if k != "round"}
    result = _call(app, "tool_step", legacy)

    assert result["status"] == "done"
    assert result["is_error"] is False


def test_the_step_handlers_write_nothing_outside_the_session_partition(app: ModuleType) -> None:
    _start('call echo {"text": "kept"}')
    for handler, event in _turn_events():
        _call(app, handler, event)

    items = boto3.client("dynamodb").scan(TableName=TABLE)["Items"]
    ttl = load_template()["Resources"]["SessionTable"]["Properties"]["TimeToLiveSpecification"]
    assert items
    # No idempotency records: the session's partition, and the spend ledger's counters (every
    # round is charged to its user's day, docs/usage.md), nothing else.
    session = [i for i in items if i["pk"]["S"].startswith("SESSION#")]
    assert session
    assert all(i["pk"]["S"].startswith("SPEND#") for i in items if i not in session)
    assert not any(ttl["AttributeName"] in i for i in session)  # session data never expires


def test_a_long_caught_error_is_cut_visibly_not_silently(app: ModuleType) -> None:
    _start("hello")
    execution = _event("execution_input")
    message = "x" * 5000
    cause = json.dumps({"errorType": "RuntimeError", "errorMessage": message})

    result = _call(
        app,
        "fail_turn",
        {
            "session_id": execution["session_id"],
            "op_id": execution["op_id"],
            "caught": {"Error": "RuntimeError", "Cause": cause},
        },
    )

    assert result["error"].startswith("RuntimeError: xxx")
    assert result["error"].endswith("characters, cut]")


def test_a_payload_that_is_not_a_json_object_is_rejected_as_a_wiring_error(
    app: ModuleType,
) -> None:
    for handler in ("model_step", "tool_step", "finish_turn", "fail_turn"):
        with pytest.raises(StepEventError, match="JSON object"):
            getattr(app, handler)(["demo-session", "op-demo"], FakeContext(function_name=handler))


def _session_items() -> dict[tuple[str, str], dict[str, Any]]:
    items = boto3.client("dynamodb").scan(TableName=TABLE)["Items"]
    return {(i["pk"]["S"], i["sk"]["S"]): i for i in items if i["pk"]["S"].startswith("SESSION#")}


def _turn_events() -> list[tuple[str, dict[str, Any]]]:
    """The handler and payload of every task of a turn with one echo call, in order."""
    return [
        ("model_step", _event("model_step")),
        ("tool_step", _event("tool_step")),
        ("model_step", {**_event("model_step"), "round": 1}),
        ("finish_turn", _event("finish_turn")),
    ]


def test_each_step_delivered_again_answers_the_same_and_commits_nothing_twice(
    app: ModuleType,
) -> None:
    # Express workflows deliver tasks at least once and a Retry redelivers (docs/step-functions.md):
    # the harness's fencing makes a redelivery answer what the first delivery did, changing nothing.
    _start('call echo {"text": "once"}')
    for handler, event in _turn_events():
        first = _call(app, handler, event)
        committed = _session_items()
        assert _call(app, handler, event) == first, handler
        assert _session_items() == committed, handler

    # The user message, the call, its result and the answer: each once.
    entries = [sk for _pk, sk in _session_items() if sk.startswith("S#E#")]
    assert len(entries) == 4, entries


class _DuplicateDuringStream(ScriptedProvider):
    """The scripted model; its first stream delivers the same model step again once it has
    yielded `after_events` events (0: before the first delivery wrote any frame)."""

    def __init__(self, after_events: int) -> None:
        super().__init__()
        self.after_events = after_events
        self.duplicate: Callable[[], dict[str, Any]] = dict
        self.answers: list[dict[str, Any]] = []
        self.streams = 0

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        self.streams += 1
        first = self.streams == 1
        for index, event in enumerate(super().stream(request)):
            if first and index == self.after_events:
                self.answers.append(self.duplicate())
            yield event


@pytest.mark.parametrize(
    ("after_events", "settled", "model_calls"),
    [
        (0, "tools", 2),  # both call the model; the duplicate settles first
        (1, "model", 1),  # the duplicate takes the streaming delivery for a dead one
    ],
)
def test_two_interleaved_deliveries_of_one_model_step_settle_the_round_once(
    app: ModuleType, after_events: int, settled: str, model_calls: int
) -> None:
    # Two deliveries of one round at once (Express is at-least-once; nothing holds one back):
    # the second runs whole while the first streams, and the round settles once.
    provider = _DuplicateDuringStream(after_events)
    event = _event("model_step")
    provider.duplicate = lambda: _call(app, "model_step", event)
    settings = TurnkeepSettings(frame_interval_ms=0)  # every event is its own frame commit
    container.install_runtime(build_runtime(settings, provider=provider))
    _start('call echo {"text": "once"}')

    # The first delivery's settlement finds the round settled: it commits nothing, and the
    # state machine retries it.
    with pytest.raises(RetryableStepError, match="EntryConflictError"):
        _call(app, "model_step", event)
    [duplicate] = provider.answers
    assert duplicate["next"] == settled
    assert _call(app, "model_step", event) == duplicate  # the retry answers the settled round
    assert provider.streams == model_calls

    entries = [sk for _pk, sk in _session_items() if sk.startswith("S#E#")]
    assert len(entries) == 2, entries  # the user message and one response of round 0
    with open_storage(container.runtime().storage_url, event["session_id"]) as storage:
        state = load_state(storage, event["op_id"])
    assert state is not None
    assert state.round == 1
