"""The tool step: run one tool call of the current round at most once unless it is
replay-safe, with each call-state change committed fenced by the operation state."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from turnkeep.harness import approvals
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.envelope_io import read_ahead
from turnkeep.harness.errors import CallLeaseExpiredError, FencedWriteError, StepInputError
from turnkeep.harness.io import ToolStepInput, ToolStepOutput
from turnkeep.harness.progress import ToolProgress, fenced_commit
from turnkeep.harness.recovery import unfinished_text
from turnkeep.harness.state import (
    CallState,
    OperationState,
    call_address,
    load_state,
    op_address,
    result_address,
    result_entry_id,
)
from turnkeep.harness.steps.common import (
    cancelling,
    no_operation,
    open_session,
    settle_envelope,
)
from turnkeep.harness.tool_results import (
    MIN_PREVIEW_CHARS,
    preview_chars,
    size_result,
    turn_window,
)
from turnkeep.harness.transcript import message_from_json
from turnkeep.providers.base import ToolResultPart
from turnkeep.storage import GuardFailedError, Storage, Write, set_value
from turnkeep.tools.base import READ_TOOL_RESULT, ToolContext
from turnkeep.tools.state import ToolState, state_writes
from turnkeep.tools.state import load_state as load_tool_state


def tool_step(deps: HarnessDeps, inp: ToolStepInput) -> ToolStepOutput:
    """Run one tool call of the current round, at most once unless it is replay-safe.

    A call found `started` (an earlier delivery died mid-call: outcome unknown) is re-run only
    if its tool declares `replay_safe`; otherwise it is recorded as an interrupted error result.
    """
    with open_session(deps, inp.session_id) as storage:
        envelope = read_ahead(
            deps,
            storage,
            values=[
                op_address(inp.op_id),
                result_address(inp.op_id),
                call_address(inp.op_id, inp.call_id),
            ],
            head=True,
        )
        state = load_state(storage, inp.op_id)
        if state is None:
            if settle_envelope(deps, storage, inp.session_id, inp.op_id) is None:
                raise no_operation(inp.session_id, inp.op_id)
            return _tool_output(inp, "skipped")
        found = _load_call(storage, state.op_id, inp.call_id)
        if found is None:
            return _settled_or_unknown(storage, state, inp)
        call, call_seq = found
        if call.phase == "done":
            return _tool_output(inp, "done", call)
        if call.phase == "started" and _held_elsewhere(deps, call):
            # A concurrent duplicate delivery runs it now: wait for its result, never run twice.
            return _await_holder(deps, inp)
        if cancelling(envelope, state.op_id):
            return _tool_output(inp, "skipped")  # the next model step aborts the turn
        registry = deps.registry(state.session_id, state.user_id)
        if (
            call.phase == "pending"
            and call.approval is None
            and approvals.needs_approval(
                registry, envelope.meta if envelope is not None else {}, call.name
            )
        ):
            return _gate(deps, storage, state, call, inp)
        if call.phase == "awaiting":
            try:
                call = approvals.expire(
                    deps, storage, state, call, force=inp.approval == "timed_out"
                )
            except FencedWriteError:
                return _tool_output(inp, "skipped")
            decision = call.approval.decision if call.approval is not None else None
            if decision is None:
                return _awaiting_output(deps, inp, call)
            if decision.decision in ("deny", "timeout"):
                denied = call.model_copy(
                    update={
                        "phase": "done",
                        "is_error": True,
                        "content": approvals.denial_text(
                            call, decision, deps.limits.approval_timeout_seconds
                        ),
                    }
                )
                if not _fenced_session_commit(storage, state.op_id, call, denied):
                    return _tool_output(inp, "skipped")
                approvals.refresh_status(deps, storage, state)
                return _tool_output(inp, "done", denied)
            call = _approved(deps, storage, state, call)
        replayed = False
        if call.phase == "started":  # its delivery died: outcome unknown
            if not registry.is_replay_safe(call.name):
                done = call.model_copy(
                    update={
                        "phase": "done",
                        "is_error": True,
                        "interrupted": True,
                        "content": unfinished_text(
                            call,
                            "its outcome is unknown (the step was interrupted) and the tool is "
                            "not replay-safe, so it was not run again; check its effects "
                            "before calling it again",
                        ),
                    }
                )
                if _claim(storage, state.op_id, done, call_seq) is None:
                    return _await_holder(deps, inp)
                return _tool_output(inp, "done", done)
            replayed = True
        started = call.model_copy(
            update={
                "phase": "started",
                "attempts": call.attempts + 1,
                "replayed": replayed,
                "started_at": deps.clock(),
            }
        )
        # The claim: a compare-and-set on the call state as read, so of two concurrent
        # deliveries exactly one runs the tool (docs/harness.md, "Tool calls").
        started_seq = _claim(storage, state.op_id, started, call_seq)
        if started_seq is None:
            return _await_holder(deps, inp)
        ctx_progress = ToolProgress(storage, state.op_id, call.call_id)
        ctx = ToolContext(
            session_id=state.session_id,
            user_id=state.user_id,
            operation_id=state.op_id,
            call_id=call.call_id,
            extras={"progress": ctx_progress, "replayed": replayed},
            state=ToolState(loader=lambda: load_tool_state(storage)),
            deps_source=deps.agent.deps,
        )
        arguments = approvals.effective_arguments(call)
        result = registry.run_call(call.name, arguments, ctx, deps.tool_runner)
        ctx.state.seal()  # its writes commit with the result below, or not at all
        content = _sized(deps, storage, state, call, result.content)
        note = approvals.edited_note(call)
        if note is not None:  # the model learns its arguments were changed
            content = f"{note}\n{content}"
        done = started.model_copy(
            update={"phase": "done", "content": content, "is_error": result.is_error}
        )
        if _claim(storage, state.op_id, done, started_seq, state_writes(ctx.state)) is None:
            return _tool_output(inp, "skipped")  # the turn ended meanwhile
        return _tool_output(inp, "done", done)


def _load_call(storage: Storage, op_id: str, call_id: str) -> tuple[CallState, int] | None:
    """The call state with the sequence of its version (what a claim compares against)."""
    stored = storage.get_value(call_address(op_id, call_id))
    if stored is None:
        return None
    return CallState.model_validate(stored.value), stored.seq


def _claim(
    storage: Storage, op_id: str, after: CallState, seq: int, also: Sequence[Write] = ()
) -> int | None:
    """Write `after` (and `also`: the call's tool-state writes) only while the call state is
    still the version at `seq` (which also means the operation runs: its terminal commit
    deletes every call state). Returns the new version's sequence, None when another writer
    got there first."""
    address = call_address(op_id, after.call_id)
    try:
        result = storage.commit(
            [set_value(address, after.model_dump(mode="json")), *also],
            guard=address,
            guard_seq=seq,
        )
    except GuardFailedError:
        return None
    return result.seqs[0]


def _held_elsewhere(deps: HarnessDeps, call: CallState) -> bool:
    """Whether a `started` call is within its lease (its delivery may still be running it)."""
    lease = deps.limits.tool_lease_seconds
    return lease > 0 and call.started_at is not None and deps.clock() < call.started_at + lease


def _settled_or_unknown(
    storage: Storage, state: OperationState, inp: ToolStepInput
) -> ToolStepOutput:
    settled = storage.get_entries(
        [result_entry_id(state.op_id, r, inp.call_id) for r in range(state.round)]
    )
    if settled:
        return _settled_tool_output(inp, settled[-1].data)
    raise StepInputError(f"operation {inp.op_id!r} has no tool call {inp.call_id!r}")


def _await_holder(deps: HarnessDeps, inp: ToolStepInput) -> ToolStepOutput:
    """Report the outcome of a call another delivery changed first (it won the claim, or
    holds it now): polled until it is done, settled or the holder's lease ends.

    A lease that ends with the call still `started` means that delivery died: this step then
    raises `CallLeaseExpiredError` (retried by the state machine), and the retry takes the
    call over as after any crash. Reads go past anything read ahead (a fresh handle).
    """
    pause = 0.05
    # Bounded by real time too: the lease is measured on the harness clock.
    give_up = time.monotonic() + deps.limits.tool_lease_seconds
    while True:
        with open_session(deps, inp.session_id) as fresh:
            state = load_state(fresh, inp.op_id)
            if state is None:
                return _tool_output(inp, "skipped")
            found = _load_call(fresh, state.op_id, inp.call_id)
            if found is None:
                return _settled_or_unknown(fresh, state, inp)
        call = found[0]
        if call.phase == "done":
            return _tool_output(inp, "done", call)
        if call.phase != "started":
            return _tool_output(inp, "skipped")  # put back by another path (an approval)
        if not _held_elsewhere(deps, call) or time.monotonic() > give_up:
            raise CallLeaseExpiredError(
                f"tool call {inp.call_id!r} of operation {inp.op_id!r}: the delivery that "
                "claimed it stopped reporting; retry to take it over"
            )
        time.sleep(pause)
        pause = min(1.0, pause * 2)


def _gate(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    call: CallState,
    inp: ToolStepInput,
) -> ToolStepOutput:
    """Park a call that needs approval (or, under Express, fail it clearly)."""
    if deps.limits.workflow_type == "EXPRESS":
        # An Express workflow cannot wait on a task token (docs/approvals.md).
        failed = call.model_copy(
            update={
                "phase": "done",
                "is_error": True,
                "content": f"Error: {call.name} needs a person's approval, and this deployment "
                "runs turns as Express workflows, which cannot wait for one (approvals need "
                "WorkflowType STANDARD). The call did not run.",
            }
        )
        if not _fenced_session_commit(storage, state.op_id, call, failed):
            return _tool_output(inp, "skipped")
        return _tool_output(inp, "done", failed)
    parked = approvals.park(deps, storage, state, call)
    if parked is None:
        return _tool_output(inp, "skipped")
    return _awaiting_output(deps, inp, parked)


def _approved(
    deps: HarnessDeps, storage: Storage, state: OperationState, call: CallState
) -> CallState:
    """An approved (or edited) call, back to `pending` so it runs like any other call."""
    approvals.refresh_status(deps, storage, state)
    return call.model_copy(update={"phase": "pending"})


def _awaiting_output(deps: HarnessDeps, inp: ToolStepInput, call: CallState) -> ToolStepOutput:
    approval = call.approval
    seconds = approvals.remaining_seconds(approval, deps.clock()) if approval else 1
    return ToolStepOutput(
        session_id=inp.session_id,
        op_id=inp.op_id,
        call_id=inp.call_id,
        status="awaiting_approval",
        approval_timeout_seconds=seconds,
    )


def _settled_tool_output(inp: ToolStepInput, data: Any) -> ToolStepOutput:
    # A redelivery after the call became a result entry reports what the first delivery did.
    meta = data if isinstance(data, dict) else {}
    parts = message_from_json(meta.get("message")).parts
    return ToolStepOutput(
        session_id=inp.session_id,
        op_id=inp.op_id,
        call_id=inp.call_id,
        status="done",
        is_error=any(isinstance(p, ToolResultPart) and p.is_error for p in parts),
        replayed=bool(meta.get("replayed")),
        interrupted=bool(meta.get("interrupted")),
    )


def _sized(
    deps: HarnessDeps, storage: Storage, state: OperationState, call: CallState, content: str
) -> str:
    """What the model sees of a result: whole, or a preview of the whole result, which is
    stored first (a page of `read_tool_result` is never stored again)."""
    if len(content) <= MIN_PREVIEW_CHARS or call.name == READ_TOOL_RESULT:
        return content  # fits any preview: no window to resolve
    window = turn_window(deps, state.model)
    preview = preview_chars(window, deps.limits.tool_result_share)
    sized = size_result(content, call.call_id, preview, deps.limits.max_tool_result_bytes)
    if sized.writes:
        # Its own commit (a result's chunks may be many): chunks left by a call whose result
        # then does not commit are overwritten by its re-run and deleted with the session.
        storage.commit(sized.writes)
    return sized.content


def _fenced_session_commit(
    storage: Storage, op_id: str, before: CallState, after: CallState
) -> bool:
    """Write a call state only while the operation runs (guarded by its operation state)."""
    address = call_address(op_id, before.call_id)
    try:
        fenced_commit(storage, op_id, [set_value(address, after.model_dump(mode="json"))])
    except FencedWriteError:
        return False
    return True


def _tool_output(inp: ToolStepInput, status: str, call: CallState | None = None) -> ToolStepOutput:
    return ToolStepOutput(
        session_id=inp.session_id,
        op_id=inp.op_id,
        call_id=inp.call_id,
        status=status,  # type: ignore[arg-type]
        is_error=call.is_error if call is not None else False,
        replayed=call.replayed if call is not None else False,
        interrupted=call.interrupted if call is not None else False,
    )
