"""The tool step: run one tool call of the current round at most once unless it is
replay-safe, with each call-state change committed fenced by the operation state."""

from __future__ import annotations

import time
from collections.abc import Sequence

from turnkeep.envelope import Envelope
from turnkeep.harness.child_approvals import pause_writes
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.envelope_io import read_ahead
from turnkeep.harness.errors import CallLeaseExpiredError, StepInputError
from turnkeep.harness.io import ToolStepInput, ToolStepOutput
from turnkeep.harness.progress import ToolProgress
from turnkeep.harness.recovery import unfinished_text
from turnkeep.harness.state import (
    CallState,
    OperationState,
    ToolImageRef,
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
from turnkeep.harness.steps.tool_approval import Cleared, clear_for_run
from turnkeep.harness.steps.tool_child import child_call, child_turn_step
from turnkeep.harness.steps.tool_outputs import settled_tool_output, tool_output
from turnkeep.harness.tool_images import keep_tool_images
from turnkeep.harness.tool_results import (
    MIN_PREVIEW_CHARS,
    preview_chars,
    size_result,
    turn_window,
)
from turnkeep.storage import GuardFailedError, Storage, Write, set_value
from turnkeep.telemetry import genai
from turnkeep.tools.base import READ_TOOL_RESULT, ToolContext
from turnkeep.tools.registry import ToolRegistry
from turnkeep.tools.state import ToolState, state_writes
from turnkeep.tools.state import load_state as load_tool_state


def tool_step(deps: HarnessDeps, inp: ToolStepInput) -> ToolStepOutput:
    """Run one tool call of the current round, at most once unless it is replay-safe.

    A call found `started` (an earlier delivery died mid-call: outcome unknown) is re-run only
    if its tool declares `replay_safe`; otherwise it is recorded as an interrupted error result.
    The phases, in order: load the call, clear it with a person (steps/tool_approval.py),
    settle an interrupted run, run it.
    """
    with open_session(deps, inp.session_id) as storage:
        loaded = _load_for_step(deps, storage, inp)
        if isinstance(loaded, ToolStepOutput):
            return loaded
        state, (call, call_seq), envelope = loaded
        registry = deps.registry(state.session_id, state.user_id)
        cleared = clear_for_run(
            deps, storage, state, call, inp, registry=registry, envelope=envelope
        )
        if isinstance(cleared, ToolStepOutput):
            return cleared
        sub = child_call(cleared.call, deps)
        if sub is not None:  # on Step Functions: the execution runs the child turn
            return child_turn_step(
                deps,
                storage,
                inp,
                state=state,
                call=(cleared.call, call_seq),
                sub=sub,
                arguments=cleared.arguments,
                registry=registry,
            )
        replayed = False
        if cleared.call.phase == "started":  # its delivery died: outcome unknown
            if not registry.is_replay_safe(cleared.call.name):
                return _record_unknown_outcome(
                    deps, storage, inp, state=state, call=cleared.call, call_seq=call_seq
                )
            replayed = True
        return _run(
            deps,
            storage,
            inp,
            state=state,
            cleared=cleared,
            call_seq=call_seq,
            registry=registry,
            replayed=replayed,
        )


# --- Phase 1: load the call (or what is already decided about it) ---


def _load_for_step(
    deps: HarnessDeps, storage: Storage, inp: ToolStepInput
) -> ToolStepOutput | tuple[OperationState, tuple[CallState, int], Envelope | None]:
    """The running operation, the call with its version's sequence and the envelope; or the
    output when the turn ended, the call is done, held by another delivery, or cancelled."""
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
        return tool_output(inp, "skipped")
    found = _load_call(storage, state.op_id, inp.call_id)
    if found is None:
        return _settled_or_unknown(storage, state, inp)
    call = found[0]
    if call.phase == "done":
        return tool_output(inp, "done", call)
    if call.phase == "started" and _held_elsewhere(deps, call):
        # A concurrent duplicate delivery runs it now: wait for its result, never run twice.
        return _await_holder(deps, inp)
    if cancelling(envelope, state.op_id):
        return tool_output(inp, "skipped")  # the next model step aborts the turn
    return state, found, envelope


# --- Phase 3: settle a run whose outcome is unknown ---


def _record_unknown_outcome(
    deps: HarnessDeps,
    storage: Storage,
    inp: ToolStepInput,
    *,
    state: OperationState,
    call: CallState,
    call_seq: int,
) -> ToolStepOutput:
    """Answer a `started` call of a tool that is not replay-safe as interrupted, unrun."""
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
    return tool_output(inp, "done", done)


# --- Phase 4: run the call ---


def _run(
    deps: HarnessDeps,
    storage: Storage,
    inp: ToolStepInput,
    *,
    state: OperationState,
    cleared: Cleared,
    call_seq: int,
    registry: ToolRegistry,
    replayed: bool,
) -> ToolStepOutput:
    """Claim the call, run its tool, and commit the sized result with the tool's state writes
    while the claim still holds."""
    call = cleared.call
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
    ctx = ToolContext(
        session_id=state.session_id,
        user_id=state.user_id,
        operation_id=state.op_id,
        call_id=call.call_id,
        extras={"progress": ToolProgress(storage, state.op_id, call.call_id), "replayed": replayed},
        state=ToolState(loader=lambda: load_tool_state(storage)),
        deps_source=deps.agent.deps,
    )
    with genai.tool_span(
        state.trace_parent,
        session_id=state.session_id,
        op_id=state.op_id,
        call_id=call.call_id,
        name=call.name,
        arguments=cleared.arguments,
    ) as span:
        result = registry.run_call(call.name, cleared.arguments, ctx, deps.tool_runner)
        genai.tool_done(span, result.content, is_error=result.is_error)
    ended = deps.clock()
    ctx.state.seal()  # its writes commit with the result below, or not at all
    waiting = ctx.extras.get("child_awaiting")
    if isinstance(waiting, int):  # its child turn waits for a person: the parent pauses too
        return _pause_for_child(
            deps,
            storage,
            inp,
            state=state,
            started=started,
            started_seq=started_seq,
            seconds=waiting,
        )
    content = _sized(deps, storage, state, call, result.content)
    if cleared.note is not None:  # the model learns its arguments were changed
        content = f"{cleared.note}\n{content}"
    kept: list[ToolImageRef] = []
    if result.images:
        # Stored before the result commits; a call re-run after a crash keeps them under the
        # same derived ids (harness/tool_images.py), so they are stored once.
        kept, notes = keep_tool_images(
            deps.tool_images,
            storage,
            call.name,
            result.images,
            origin=f"{state.session_id}/{state.op_id}/{call.call_id}",
        )
        content = "\n".join([content, *notes])
    done = started.model_copy(
        update={
            "phase": "done",
            "content": content,
            "is_error": result.is_error,
            "ended_at": ended,
            "child": ctx.extras.get("child"),
            "attachments": kept,
        }
    )
    if _claim(storage, state.op_id, done, started_seq, state_writes(ctx.state)) is None:
        return tool_output(inp, "skipped")  # the turn ended meanwhile
    return tool_output(inp, "done", done)


def _pause_for_child(
    deps: HarnessDeps,
    storage: Storage,
    inp: ToolStepInput,
    *,
    state: OperationState,
    started: CallState,
    started_seq: int,
    seconds: int,
) -> ToolStepOutput:
    """Put a sub-agent call whose child waits for a person back to `pending`, with entries
    showing the child's requests (docs/approvals.md, "Inside a sub-agent"), and wait."""
    back = started.model_copy(update={"phase": "pending", "started_at": None})
    also = pause_writes(storage, deps, state, started)
    if _claim(storage, state.op_id, back, started_seq, also) is None:
        return tool_output(inp, "skipped")  # the turn ended meanwhile
    return ToolStepOutput(
        session_id=inp.session_id,
        op_id=inp.op_id,
        call_id=inp.call_id,
        status="awaiting_approval",
        approval_timeout_seconds=seconds,
    )


# --- Shared by the phases: the call's version, claims, the holder of a claim ---


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
        return settled_tool_output(inp, settled[-1].data)
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
                return tool_output(inp, "skipped")
            found = _load_call(fresh, state.op_id, inp.call_id)
            if found is None:
                return _settled_or_unknown(fresh, state, inp)
        call = found[0]
        if call.phase == "done":
            return tool_output(inp, "done", call)
        if call.phase != "started":
            return tool_output(inp, "skipped")  # put back by another path (an approval)
        if not _held_elsewhere(deps, call) or time.monotonic() > give_up:
            raise CallLeaseExpiredError(
                f"tool call {inp.call_id!r} of operation {inp.op_id!r}: the delivery that "
                "claimed it stopped reporting; retry to take it over"
            )
        time.sleep(pause)
        pause = min(1.0, pause * 2)


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
