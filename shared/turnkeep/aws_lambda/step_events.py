"""Step Functions task payloads ↔ harness steps: parse the event, run the step, classify errors.

The Lambda handlers in `functions/` are thin wrappers around `run_step`. A step raises
`RetryableStepError` for failures the state machine's Retry may repeat with the same input
(throttling, 5xx, storage contention, a commit a concurrent duplicate delivery made first);
anything else propagates to the Catch, which ends the turn through `fail_turn`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from turnkeep.envelope.errors import EnvelopeConflictError, EnvelopeUnavailableError
from turnkeep.harness import (
    FailTurnInput,
    FinishTurnInput,
    HarnessDeps,
    ModelStepInput,
    ToolStepInput,
    fail_turn,
    finish_turn,
    model_step,
    tool_step,
)
from turnkeep.harness.approvals import hold_wait
from turnkeep.harness.errors import CallLeaseExpiredError
from turnkeep.providers.base import ModelError
from turnkeep.storage import EntryConflictError, StorageConflictError, StorageUnavailableError
from turnkeep.telemetry import flush

StepName = Literal["model_step", "tool_step", "finish_turn", "fail_turn", "approval_wait"]
STEP_NAMES: Final[tuple[StepName, ...]] = ("model_step", "tool_step", "finish_turn", "fail_turn")

FAIL_ERROR_MAX_CHARS: Final = 1000
"""What the turn keeps of an error text; `fail_turn` cuts a longer one visibly (never here)."""


class RetryableStepError(Exception):
    """A transient failure: the state machine retries the step with the same input."""


class StepEventError(ValueError):
    """The task payload is not a valid input of the step (a wiring bug: never retried)."""


class CaughtError(BaseModel):
    """What a Step Functions Catch puts at its ResultPath."""

    # These payload models are built on first use: each handler uses few of them.
    model_config = ConfigDict(extra="ignore", defer_build=True)

    Error: str = "States.Unknown"
    Cause: str | None = None


class ApprovalWaitEvent(BaseModel):
    """The approval wait's payload (`.waitForTaskToken` on the tool step function)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    session_id: str
    op_id: str
    round: int
    call_id: str
    task_token: str


class ApprovalWaitOutput(BaseModel):
    """What the wait step did with its token (the execution waits for SendTaskSuccess)."""

    model_config = ConfigDict(defer_build=True)

    session_id: str
    op_id: str
    call_id: str
    status: str


class FailTurnEvent(BaseModel):
    """fail_turn's payload: an error text from a step, or what a Catch caught."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    session_id: str
    op_id: str
    error: str | None = None
    caught: CaughtError | None = None


def describe_caught(caught: CaughtError) -> str:
    """One honest line from a Catch: the error name and the Lambda's own message if present
    (whole: `fail_turn` cuts it visibly to FAIL_ERROR_MAX_CHARS)."""
    message = caught.Cause or ""
    try:
        cause = json.loads(message) if message else None
    except json.JSONDecodeError:
        cause = None
    if isinstance(cause, dict) and isinstance(cause.get("errorMessage"), str):
        message = cause["errorMessage"]
        name = str(cause.get("errorType") or caught.Error)
    else:
        name = caught.Error
    return f"{name}: {message}" if message else name


def _parse(model: type[BaseModel], event: Mapping[str, Any]) -> Any:
    try:
        return model.model_validate(dict(event))
    except ValidationError as exc:
        raise StepEventError(f"invalid {model.__name__} payload: {exc}") from exc


def _run(step: StepName, deps: HarnessDeps, event: Mapping[str, Any]) -> BaseModel:
    if step == "model_step":
        return model_step(deps, _parse(ModelStepInput, event))
    if step == "tool_step":
        # `round` (the round whose calls the Map runs) is not a harness input: the call state
        # knows its round.
        fields = {k: v for k, v in event.items() if k != "round"}
        return tool_step(deps, _parse(ToolStepInput, fields))
    if step == "finish_turn":
        return finish_turn(deps, _parse(FinishTurnInput, event))
    if step == "approval_wait":
        wait: ApprovalWaitEvent = _parse(ApprovalWaitEvent, event)
        status = hold_wait(
            deps, wait.session_id, wait.op_id, wait.call_id, wait.task_token, release=release_token
        )
        return ApprovalWaitOutput(
            session_id=wait.session_id, op_id=wait.op_id, call_id=wait.call_id, status=status
        )
    parsed: FailTurnEvent = _parse(FailTurnEvent, event)
    error = parsed.error or (describe_caught(parsed.caught) if parsed.caught else None)
    return fail_turn(
        deps,
        FailTurnInput(
            session_id=parsed.session_id, op_id=parsed.op_id, error=error or "the turn failed"
        ),
    )


def release_token(token: str) -> None:
    """SendTaskSuccess for a wait with nothing left to wait for (a wait already over is fine)."""
    from turnkeep.plumbing.clients import shared_client

    client = shared_client("stepfunctions")
    # A wait already over (a decision released it, or it timed out) is not an error.
    with contextlib.suppress(
        client.exceptions.InvalidToken,
        client.exceptions.TaskDoesNotExist,
        client.exceptions.TaskTimedOut,
    ):
        client.send_task_success(taskToken=token, output="{}")


_TRANSIENT = (
    # A concurrent duplicate delivery committed the same deterministic entry first (the round's
    # response, a tool result): the retry answers from what it committed.
    EntryConflictError,
    StorageConflictError,
    StorageUnavailableError,
    EnvelopeConflictError,
    EnvelopeUnavailableError,
    # A tool call's claiming delivery stopped: the retry takes the call over.
    CallLeaseExpiredError,
)


def run_step(step: StepName, deps: HarnessDeps, event: Mapping[str, Any]) -> dict[str, Any]:
    """Run `step` on a task payload and return its JSON output for the state machine."""
    if not isinstance(event, Mapping):
        raise StepEventError(f"{step} expects a JSON object payload, got {type(event).__name__}")
    try:
        output = _run(step, deps, event)
    except ModelError as exc:
        if exc.retryable:
            raise RetryableStepError(f"{exc.code}: {exc}") from exc
        raise
    except _TRANSIENT as exc:
        raise RetryableStepError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        # A Lambda may be frozen right after it returns: its spans leave now (no-op when off).
        flush()
    return output.model_dump(mode="json")
