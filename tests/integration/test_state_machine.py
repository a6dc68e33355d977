"""The turn state machine of template.yaml, executed for real by moto's Step Functions
interpreter, invoking the real handlers of functions/turn_steps/ against DynamoDB and S3 (moto).

Function names, handlers and ARN substitutions are read from template.yaml, so the test fails if
the template's wiring and the definition drift apart. Every test runs on both values of the
template's WorkflowType: the template rendered for it (its state machine, definition and
workflow type), moto executing an EXPRESS machine as it does a STANDARD one.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.iam_policy import (
    Permission,
    checked_permissions,
    recording_aws_calls,
    stack_refs,
)
from tests.support.lambda_host import (
    FakeContext,
    load_function_module,
)
from tests.support.state_machine import (
    BUCKET,
    TABLE,
    USER,
    Deployed,
    api_event,
    assert_ended,
    run_turn,
    scope_objects,
    wait_for_executions,
)
from turnkeep.aws_lambda import container
from turnkeep.harness import StartTurnInput, abort_turn, cancel_turn, start_turn
from turnkeep.providers.base import (
    FatalModelError,
    Message,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ResponseDone,
    RetryableModelError,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolCallStart,
    ToolResultPart,
)
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import build_runtime
from turnkeep.storage import open_storage
from turnkeep.system_prompt import WORKING_NOTES_HEADING


def test_a_turn_with_two_parallel_tool_calls_runs_through_the_state_machine(
    deployed: Deployed,
) -> None:
    session = "sfn-tools"
    op_id, output = run_turn(
        deployed,
        session,
        'call calculator {"expression": "6*7"}\ncall echo {"text": "hi"}',
    )

    assert output["status"] == "completed"
    invoked = [name for name, _event, _error in deployed.host.calls]
    assert invoked.count("ToolStepFunction") == 2
    assert invoked[-1] == "FinishTurnFunction"
    with open_storage(deployed.storage_url, session) as storage:
        entries = storage.scan_entries()
        texts = json.dumps([e.data for e in entries])
    assert "42" in texts
    assert_ended(deployed, session, op_id, "completed")


def test_a_note_written_in_one_execution_is_folded_into_the_next_turns_prompt(
    deployed: Deployed,
) -> None:
    session = "sfn-notes"
    run_turn(deployed, session, "remember we deploy with SAM")
    _op, output = run_turn(deployed, session, "what do you remember?")

    assert output["status"] == "completed"
    envelope = container.runtime().deps.envelopes.get(session)
    assert envelope is not None
    assert "we deploy with SAM" in str(envelope.meta["workingNotes"])
    with open_storage(deployed.storage_url, session) as storage:
        reply = storage.get_entries([output["final_entry_id"]])[0]
    assert "we deploy with SAM" in json.dumps(reply.data)
    assert WORKING_NOTES_HEADING  # the fold itself is asserted by the harness tests


def test_a_step_that_crashes_is_caught_and_the_turn_fails_honestly_with_its_scope_retired(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = "sfn-crash"

    def broken(event: dict[str, Any], context: Any) -> Any:
        raise RuntimeError("disk on fire")

    with deployed.replaced("ToolStepFunction", broken):
        op_id, output = run_turn(deployed, session, 'call echo {"text": "x"}')

    assert output["status"] == "failed"
    assert "disk on fire" in output["error"]
    assert deployed.host.calls[-1][0] == "FailTurnFunction"
    assert_ended(deployed, session, op_id, "failed")


def test_a_retryable_step_failure_is_retried_with_the_same_input(deployed: Deployed) -> None:
    session = "sfn-retry"
    original = deployed.host.handlers["FinishTurnFunction"]
    failures: list[dict[str, Any]] = []

    def flaky(event: dict[str, Any], context: Any) -> Any:
        from turnkeep.aws_lambda.step_events import RetryableStepError

        if not failures:
            failures.append(event)
            raise RetryableStepError("StorageConflictError: head moved")
        return original(event, context)

    with deployed.replaced("FinishTurnFunction", flaky):
        _op, output = run_turn(deployed, session, "hello there")

    assert output["status"] == "completed"
    finish_calls = [c for c in deployed.host.calls if c[0] == "FinishTurnFunction"]
    assert [c[2] for c in finish_calls] == ["RetryableStepError", None]
    assert finish_calls[0][1] == finish_calls[1][1]
    # One wait before the retry, within the first interval (2 s, full jitter) of the definition.
    assert len(deployed.retry_waits) == 1
    assert 0 <= deployed.retry_waits[0] <= 2


def test_a_turn_started_through_the_api_lambda_runs_on_step_functions_and_streams_back(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """API Gateway event -> API Lambda -> StartExecution -> the state machine's step Lambdas ->
    DynamoDB/S3, then the events route pages the settled turn back by global sequence."""
    monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", deployed.state_machine_arn)
    api = load_function_module("api")

    def call(event: dict[str, Any]) -> tuple[int, Any]:
        with deployed.host.acting_as("ApiFunction"):
            answer: dict[str, Any] = api.handler(event, FakeContext(function_name="ApiFunction"))
        return int(answer["statusCode"]), json.loads(answer["body"]) if answer["body"] else None

    session = "sample-session"  # the id in the sample events
    status, _ = call(api_event("create_session", "/sessions"))
    assert status == 201
    status, started = call(
        api_event(
            "start_turn",
            f"/sessions/{session}/turns",
            body=json.dumps({"text": 'call calculator {"expression": "6*7"}'}),
        )
    )
    assert status == 202
    turn = started["turn_id"]

    events: list[dict[str, Any]] = []
    cursor = 0
    deadline = time.monotonic() + 60
    finished = False
    while not finished and time.monotonic() < deadline:
        status, page = call(
            api_event(
                "get_events",
                f"/sessions/{session}/turns/{turn}/events",
                f"cursor={cursor}&limit=100",
            )
        )
        assert status == 200
        events.extend(page["events"])
        cursor, finished = page["next_cursor"], page["finished"]
        if not finished:
            time.sleep(0.05)

    assert finished
    assert page["status"] == "completed"
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs))  # each event once, in global-sequence order
    entries = [e for e in events if e["kind"] == "entry"]
    assert [e["role"] for e in entries] == ["user", "assistant", "tool", "assistant"]
    assert "42" in json.dumps(entries[-1]["parts"])
    # The turn reads as finished once finish_turn committed, a moment before its Lambda returns.
    wait_for_executions(deployed)
    invoked = [name for name, _event, _error in deployed.host.calls]
    assert invoked.count("ModelStepFunction") == 2
    assert invoked[-1] == "FinishTurnFunction"


# -- model outcomes, cancels and wiring faults through the real definition ---------------------


def _use_provider(monkeypatch: pytest.MonkeyPatch, provider: ModelProvider) -> None:
    """Make the hosted handlers' runtime call `provider` for every model round."""
    monkeypatch.setattr(
        container, "build_runtime", functools.partial(build_runtime, provider=provider)
    )
    container.reset_runtime()


def _entry(deployed: Deployed, session: str, entry_id: str) -> dict[str, Any]:
    with open_storage(deployed.storage_url, session) as storage:
        found = storage.get_entries([entry_id])
    assert found, entry_id
    data: dict[str, Any] = dict(found[0].data)  # type: ignore[arg-type]
    return data


class _FatalModel(ModelProvider):
    name = "fatal"

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        raise FatalModelError("the prompt is too long for this model", code="context_length")


class _DropsFirstStream(ModelProvider):
    """The scripted model, except that the first stream dies after its first frame."""

    name = "drops-first"

    def __init__(self) -> None:
        self.inner = ScriptedProvider()
        self.dropped = False

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        for event in self.inner.stream(request):
            yield event
            if not self.dropped:
                self.dropped = True
                raise RetryableModelError("throttled mid-stream", code="throttling")


class _ReusesCallIds(ModelProvider):
    """Calls `echo` with the same call id in two rounds (some endpoints number their calls per
    response), then answers."""

    name = "reuses-ids"

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        results = [p for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]
        if len(results) < 2:
            call = ToolCallPart("call_0", "echo", json.dumps({"text": f"round {len(results)}"}))
            yield ToolCallStart(0, call.id, call.name)
            yield ToolCallDelta(0, call.arguments)
            yield ResponseDone(ModelResponse(Message("assistant", (call,)), "tool_use"))
            return
        yield TextDelta("done")
        yield ResponseDone(ModelResponse(Message("assistant", (TextPart("done"),)), "end_turn"))


def test_a_fatal_model_error_ends_the_turn_through_fail_turn_from_model_with_its_message(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_provider(monkeypatch, _FatalModel())
    session = "sfn-fatal"
    op_id, output = run_turn(deployed, session, "hello")

    assert output["status"] == "failed"
    # A context_length error with nothing older to compact is not retried, and says so.
    assert output["error"] == (
        "model error (context_length): the prompt is too long for this model (no older turn "
        "to summarize, so the round was not retried)"
    )
    assert [(name, error) for name, _e, error in deployed.host.calls] == [
        ("ModelStepFunction", None),
        ("FailTurnFunction", None),
    ]
    fail_event = deployed.host.calls[-1][1]
    assert fail_event == {"session_id": session, "op_id": op_id, "error": output["error"]}
    assert_ended(deployed, session, op_id, "failed")


def test_a_model_round_cut_by_a_retryable_provider_error_is_retried_and_recorded_interrupted(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_provider(monkeypatch, _DropsFirstStream())
    session = "sfn-dropped"
    op_id, output = run_turn(deployed, session, "hello there")

    assert output["status"] == "completed"
    model_calls = [(e, err) for name, e, err in deployed.host.calls if name == "ModelStepFunction"]
    assert [err for _e, err in model_calls] == ["RetryableStepError", None, None]
    assert model_calls[0][0] == model_calls[1][0]  # the same round, retried with the same input
    assert [e["round"] for e, _err in model_calls] == [0, 0, 1]
    interrupted = _entry(deployed, session, f"{op_id}:r0")
    assert interrupted["interrupted"] is True
    assert "[response interrupted]" in json.dumps(interrupted["message"])
    final = _entry(deployed, session, output["final_entry_id"])
    assert "You said: hello there" in json.dumps(final["message"])


def test_a_cancel_during_the_tool_batch_ends_the_execution_in_turn_already_ended(
    deployed: Deployed,
) -> None:
    session = "sfn-cancel"
    original = deployed.host.handlers["ToolStepFunction"]

    def cancel_then_run(event: dict[str, Any], context: Any) -> Any:
        cancel_turn(container.runtime().deps, event["session_id"], event["op_id"])
        return original(event, context)

    with deployed.replaced("ToolStepFunction", cancel_then_run):
        op_id, output = run_turn(deployed, session, 'call echo {"text": "never run"}')

    assert output["model"]["next"] == "done"
    assert output["model"]["status"] == "aborted"
    invoked = [name for name, _event, _error in deployed.host.calls]
    assert invoked == ["ModelStepFunction", "ToolStepFunction", "ModelStepFunction"]
    assert deployed.host.calls[1][2] is None  # the tool step skipped, it did not fail
    assert_ended(deployed, session, op_id, "aborted")


def test_an_execution_that_finds_its_turn_ended_repairs_an_envelope_left_running(
    deployed: Deployed,
) -> None:
    """The kill between the terminal commit and the envelope write, then the relaunch on AWS:
    model_step -> ended_output -> TurnAlreadyEnded must leave the envelope saying how it ended,
    and so must a late tool step delivery."""
    deps = container.runtime().deps
    session = "sfn-lost-update"
    deps.envelopes.create(session, USER)
    op_id = f"op-lost-{time.monotonic_ns()}"
    start_turn(deps, StartTurnInput(session_id=session, op_id=op_id, user_id=USER, text="hi"))
    abort_turn(deps, session, op_id)  # the turn ended elsewhere ...
    deps.envelopes.update_worker_meta(session, {"turnStatus": "running"})  # ... update lost

    execution = deployed.sfn.start_execution(
        stateMachineArn=deployed.state_machine_arn,
        name=op_id,
        input=json.dumps({"session_id": session, "op_id": op_id, "round": 0}),
    )["executionArn"]
    wait_for_executions(deployed)

    described = deployed.sfn.describe_execution(executionArn=execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["model"]["next"] == "done"
    envelope = deps.envelopes.get(session)
    assert envelope is not None
    assert envelope.meta["turnStatus"] == "aborted"

    deps.envelopes.update_worker_meta(session, {"turnStatus": "cancelling"})
    app = load_function_module("turn_steps")
    out = app.tool_step(
        {"session_id": session, "op_id": op_id, "round": 0, "call_id": "c1"},
        FakeContext(function_name="ToolStepFunction"),
    )
    assert out["status"] == "skipped"
    envelope = deps.envelopes.get(session)
    assert envelope is not None
    assert envelope.meta["turnStatus"] == "aborted"


def test_an_unknown_next_action_fails_the_turn_instead_of_ending_the_execution_silently(
    deployed: Deployed,
) -> None:
    session = "sfn-unknown-next"
    original = deployed.host.handlers["ModelStepFunction"]

    def garbled(event: dict[str, Any], context: Any) -> Any:
        return {**original(event, context), "next": "teleport"}

    with deployed.replaced("ModelStepFunction", garbled):
        op_id, output = run_turn(deployed, session, "hello")

    assert output["status"] == "failed"
    assert "UnknownNextAction" in output["error"]
    assert deployed.host.calls[-1][0] == "FailTurnFunction"
    assert scope_objects(deployed, session, op_id) == []


def test_a_call_id_the_model_reuses_in_a_later_round_runs_the_tool_again(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_provider(monkeypatch, _ReusesCallIds())
    session = "sfn-reused-ids"
    op_id, output = run_turn(deployed, session, "go")

    assert output["status"] == "completed"
    tool_events = [e for name, e, _err in deployed.host.calls if name == "ToolStepFunction"]
    assert [(e["call_id"], e["round"]) for e in tool_events] == [("call_0", 0), ("call_0", 1)]
    for round_ in (0, 1):
        result = _entry(deployed, session, f"{op_id}:r{round_}:call_0")
        assert f"round {round_}" in json.dumps(result["message"])
        assert "did not report a result" not in json.dumps(result["message"])


# -- least privilege: every AWS call of every function is allowed by its template policy -------


def test_every_aws_call_of_each_function_is_allowed_by_its_template_policy(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs a turn with tool calls, a turn whose tool crashes, an API turn and a session delete,
    records each function's AWS calls and checks them against its `Policies` in template.yaml."""
    monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", deployed.state_machine_arn)
    template = deployed.template
    refs = stack_refs(TABLE, BUCKET, deployed.state_machine_arn.rsplit(":", 1)[-1])
    with recording_aws_calls(deployed.host.current_function) as log:
        run_turn(
            deployed, "iam-tools", 'call calculator {"expression": "1+1"}\ncall echo {"text": "a"}'
        )
        run_turn(deployed, "iam-tools", "remember the IAM test ran")

        def broken(event: dict[str, Any], context: Any) -> Any:
            raise RuntimeError("tool host unreachable")

        with deployed.replaced("ToolStepFunction", broken):
            run_turn(deployed, "iam-crash", 'call echo {"text": "x"}')

        api = load_function_module("api")

        def call(event: dict[str, Any]) -> int:
            with deployed.host.acting_as("ApiFunction"):
                answer = api.handler(event, FakeContext(function_name="ApiFunction"))
            return int(answer["statusCode"])

        session = "sample-session"
        assert call(api_event("create_session", "/sessions")) == 201
        start = api_event("start_turn", f"/sessions/{session}/turns", body='{"text": "hi"}')
        assert call(start) == 202
        wait_for_executions(deployed)
        # What a crashed retirement left behind: the delete must be allowed to remove it.
        leftover = f"tk/sessions/{session}/scopes/op-crashed/00000000000000000001.json"
        deployed.s3.put_object(Bucket=BUCKET, Key=leftover, Body=b"{}")
        delete = api_event("create_session", f"/sessions/{session}")
        delete["requestContext"]["http"]["method"] = "DELETE"
        delete["body"] = None
        delete["headers"].pop("content-length", None)
        assert call(delete) == 204

    by_function: dict[str, set[str]] = {}
    denied: list[tuple[str, Permission]] = []
    for function, permission, allowed in checked_permissions(template, log, refs):
        by_function.setdefault(function, set()).add(permission.action)
        if not allowed:
            denied.append((function, permission))
    assert denied == []
    # The runs above really exercised every function, its writes and its retirements.
    assert set(by_function) == {
        "ModelStepFunction",
        "ToolStepFunction",
        "FinishTurnFunction",
        "FailTurnFunction",
        "ApiFunction",
    }
    # A round's frames retire with its settlement (the model step); the crashed tool's turn
    # ends with a terminal commit whose operation scope holds nothing (no S3 call).
    assert "s3:DeleteObject" in by_function["ModelStepFunction"]
    assert "dynamodb:PutItem" in by_function["FailTurnFunction"]
    assert "s3:DeleteObject" in by_function["ApiFunction"]
    assert "states:StartExecution" in by_function["ApiFunction"]
    assert "s3:PutObject" in by_function["ModelStepFunction"]
    assert "Contents" not in deployed.s3.list_objects_v2(Bucket=BUCKET, Prefix=leftover)
