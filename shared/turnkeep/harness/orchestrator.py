"""The in-process orchestrator: drives the step functions in the order the state machine does.

start_turn → model_step(r) → [tool_step × calls, in parallel] → model_step(r+1) … →
finish_turn | fail_turn. Retryable model errors are retried with the same input (as a Step
Functions Retry would); any other exception ends the turn through fail_turn (as a Catch would).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from turnkeep.harness.approvals import mark_awaiting
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.errors import HarnessError, OperationNotFoundError
from turnkeep.harness.io import (
    AttachmentRef,
    FailTurnInput,
    FinishTurnInput,
    ModelStepInput,
    ModelStepOutput,
    StartTurnInput,
    ToolStepInput,
    ToolStepOutput,
    TurnResult,
)
from turnkeep.harness.state import load_call
from turnkeep.harness.steps import (
    EventListener,
    fail_turn,
    finish_turn,
    model_step,
    new_op_id,
    start_turn,
    tool_step,
    turn_result,
)
from turnkeep.providers.base import ModelError


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A finished tool call as an observer sees it."""

    call_id: str
    name: str
    content: str
    is_error: bool
    replayed: bool
    interrupted: bool


ToolListener = Callable[[ToolOutcome], None]


def run_turn(
    deps: HarnessDeps,
    session_id: str,
    user_id: str,
    text: str,
    *,
    op_id: str | None = None,
    model: str | None = None,
    on_event: EventListener | None = None,
    on_tool: ToolListener | None = None,
    attachments: Sequence[AttachmentRef] = (),
) -> TurnResult:
    """Run one whole turn in this process and return its terminal result (`attachments`:
    ready ones of the session, sent with the message, docs/attachments.md).

    Raises TurnConflictError / SessionNotFoundError from start_turn; every later failure is
    recorded honestly (status `failed`) and returned.
    """
    op = op_id or new_op_id()
    start_turn(
        deps,
        StartTurnInput(
            session_id=session_id,
            op_id=op,
            user_id=user_id,
            text=text,
            model=model,
            attachments=list(attachments),
        ),
    )
    return resume_turn(deps, session_id, op, on_event=on_event, on_tool=on_tool)


def resume_turn(
    deps: HarnessDeps,
    session_id: str,
    op_id: str,
    *,
    on_event: EventListener | None = None,
    on_tool: ToolListener | None = None,
    before_step: Callable[[], None] | None = None,
) -> TurnResult:
    """Drive an already started turn to its end from storage (after a crash or redelivery).

    Rounds that were settled replay their recorded outputs, so this is safe at any point.
    `before_step` is called before each model step (a sub-agent's child turn follows its
    parent's cancel through it: turnkeep.harness.subagents).
    """
    try:
        return _drive(deps, session_id, op_id, on_event, on_tool, before_step=before_step)
    except Exception as exc:
        # Like a Step Functions Catch: end the turn honestly, retiring its scope.
        try:
            return fail_turn(
                deps,
                FailTurnInput(
                    session_id=session_id, op_id=op_id, error=f"{type(exc).__name__}: {exc}"
                ),
            )
        except OperationNotFoundError:
            raise exc from None


def _drive(
    deps: HarnessDeps,
    session_id: str,
    op: str,
    on_event: EventListener | None,
    on_tool: ToolListener | None,
    *,
    before_step: Callable[[], None] | None = None,
) -> TurnResult:
    round_ = 0
    while True:
        if before_step is not None:
            before_step()
        out = _model_with_retry(
            deps, ModelStepInput(session_id=session_id, op_id=op, round=round_), on_event
        )
        if out.next == "tools":
            waiting = _run_tools(deps, out, on_tool)
            if waiting:
                # Paused for a person: return without holding a thread; the decision (or the
                # timeout) launches the turn again and the recorded rounds replay.
                return _paused(deps, out, waiting)
            round_ = out.next_round
        elif out.next == "model":
            round_ = out.next_round
        elif out.next == "finish":
            return finish_turn(deps, FinishTurnInput(session_id=session_id, op_id=op))
        elif out.next == "fail":
            return fail_turn(
                deps,
                FailTurnInput(session_id=session_id, op_id=op, error=out.error or "failed"),
            )
        else:
            result = turn_result(deps, session_id, op)
            if result is None:
                raise HarnessError(f"operation {op!r} reported done but has no result")
            return result


def _model_with_retry(
    deps: HarnessDeps, inp: ModelStepInput, on_event: EventListener | None
) -> ModelStepOutput:
    # Same input again, as a Step Functions Retry would: the retried delivery records the
    # failed attempt's frames as an interrupted response (next = "model") or reruns the round.
    attempt = 0
    while True:
        try:
            return model_step(deps, inp, on_event=on_event)
        except ModelError as exc:
            if not exc.retryable or attempt >= deps.limits.model_retries:
                raise
            deps.sleep(retry_wait(deps, attempt))
            attempt += 1


def retry_wait(deps: HarnessDeps, attempt: int) -> float:
    """Seconds to wait before retry `attempt + 1`: the interval doubled per earlier attempt,
    with full jitter (as the state machine's Retry: BackoffRate 2, JitterStrategy FULL)."""
    cap = deps.limits.model_retry_interval_seconds * 2.0**attempt
    return min(cap, max(0.0, deps.jitter(cap)))


def _paused(deps: HarnessDeps, out: ModelStepOutput, waiting: list[ToolStepOutput]) -> TurnResult:
    mark_awaiting(deps, out.session_id, out.op_id)
    return TurnResult(
        session_id=out.session_id,
        op_id=out.op_id,
        status="awaiting_approval",
        rounds=out.round + 1,
        awaiting_call_ids=[w.call_id for w in waiting],
        approval_wait_seconds=min(w.approval_timeout_seconds or 1 for w in waiting),
    )


def _run_tools(
    deps: HarnessDeps, out: ModelStepOutput, on_tool: ToolListener | None
) -> list[ToolStepOutput]:
    """Run the round's calls; returns those that wait for a person's decision."""
    inputs = [
        ToolStepInput(session_id=out.session_id, op_id=out.op_id, call_id=call_id)
        for call_id in out.call_ids
    ]
    workers = min(deps.limits.tool_parallelism, len(inputs))
    if workers <= 1:
        outputs = [tool_step(deps, inp) for inp in inputs]
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tool-step") as pool:
            outputs = list(pool.map(lambda i: tool_step(deps, i), inputs))
    if on_tool is not None:
        for output in outputs:
            _report(deps, output, on_tool)
    return [o for o in outputs if o.status == "awaiting_approval"]


def _report(deps: HarnessDeps, output: ToolStepOutput, on_tool: ToolListener) -> None:
    if output.status != "done":
        return
    storage = deps.open_storage(output.session_id)
    try:
        call = load_call(storage, output.op_id, output.call_id)
    finally:
        storage.close()
    if call is not None and call.content is not None:
        on_tool(
            ToolOutcome(
                call.call_id,
                call.name,
                call.content,
                call.is_error,
                call.replayed,
                call.interrupted,
            )
        )
