"""Ending a turn: finish, fail, abort (one fenced terminal commit, then one envelope write),
asking a running turn to stop (cancel), and reading a turn's terminal result."""

from __future__ import annotations

from turnkeep.envelope import (
    Envelope,
    EnvelopeConflictError,
    EnvelopeNotFoundError,
    turn_run_id,
    turn_status,
)
from turnkeep.harness.approvals import awaiting_calls, tokens_of
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.envelope_io import (
    attachable,
    commit_mirrored,
    commit_with_envelope,
    read_ahead,
)
from turnkeep.harness.errors import (
    OperationNotFoundError,
    SessionNotFoundError,
    StepInputError,
)
from turnkeep.harness.io import CancelResult, FailTurnInput, FinishTurnInput, TurnResult
from turnkeep.harness.recovery import terminal_writes
from turnkeep.harness.state import (
    OperationState,
    TurnRecord,
    call_address,
    head_address,
    load_record,
    load_state,
    op_address,
    op_scope,
    result_address,
    validate_op_id,
)
from turnkeep.harness.steps.common import (
    cancelling,
    clip,
    envelope_terminal,
    no_operation,
    open_session,
    result_of,
    settle_envelope,
    terminal_patch,
)
from turnkeep.harness.subagent_waits import child_tokens_of
from turnkeep.harness.subagents import cancel_children
from turnkeep.storage import GuardFailedError, Storage, retire_scope, set_value
from turnkeep.telemetry import genai
from turnkeep.turn_rules import ACTIVE_STATUSES, STARTABLE_STATUSES, TerminalStatus


def finish_turn(deps: HarnessDeps, inp: FinishTurnInput) -> TurnResult:
    """End the turn as completed (aborted if a cancel arrived); idempotent.

    It runs only after a settled round (the model step said "finish"): the current round never
    streamed, so its terminal commit does not look for frames (`unsettled_frames=False`).
    """
    with open_session(deps, inp.session_id) as storage:
        envelope = read_ahead(
            deps,
            storage,
            values=[op_address(inp.op_id), result_address(inp.op_id), head_address()],
            scopes=[op_scope(inp.op_id)],
            head=True,
        )
        state = load_state(storage, inp.op_id)
        if state is None:
            return _repeat_terminal(deps, storage, inp.session_id, inp.op_id)
        if state.pending_call_ids:
            storage.prefetch([call_address(state.op_id, c) for c in state.pending_call_ids])
        if cancelling(envelope, state.op_id):
            record = commit_terminal(
                deps, storage, state, "aborted", "cancelled by request", unsettled_frames=False
            )
        elif attachable(deps, storage):
            record = _complete_attached(deps, storage, state)
        elif not _fence_completion(deps, inp):
            record = commit_terminal(
                deps, storage, state, "aborted", "cancelled by request", unsettled_frames=False
            )
        else:
            record = commit_terminal(
                deps, storage, state, "completed", None, unsettled_frames=False
            )
        return result_of(inp.session_id, record)


def _complete_attached(deps: HarnessDeps, storage: Storage, state: OperationState) -> TurnRecord:
    """Complete the turn in one request with its envelope, only while it still says running.

    Atomic where the envelope shares the storage's table: a cancel that landed first makes the
    commit fail, and the turn is aborted instead (elsewhere `_fence_completion` orders them).
    """
    op = state.op_id
    writes, record = terminal_writes(
        storage, state, "completed", None, deps.clock(), unsettled_frames=False
    )
    try:
        commit_with_envelope(
            deps,
            storage,
            writes,
            guard=op_address(op),
            patch_for=lambda seqs: terminal_patch(record, seqs[-1]),
            expect={"turnRunId": [op], "turnStatus": ["running"]},
        )
    except GuardFailedError:
        return _terminal_winner(deps, storage, state)
    except (EnvelopeConflictError, EnvelopeNotFoundError):
        if cancelling(deps.envelopes.get(state.session_id), op):
            return commit_terminal(
                deps, storage, state, "aborted", "cancelled by request", unsettled_frames=False
            )
        return commit_terminal(deps, storage, state, "completed", None, unsettled_frames=False)
    _turn_span(deps, state, record)
    return record


def _fence_completion(deps: HarnessDeps, inp: FinishTurnInput) -> bool:
    """Mark the turn finishing unless a cancel got there first (False: it did).

    The envelope and storage are separate stores, so a cancel landing between this step's
    envelope read and its terminal commit would be answered "cancelling" and then lost. This
    compare-and-set orders the two: a cancel after it sees `turnFinishing` and reports that it
    cannot take effect; a cancel before it makes it fail, and the turn is aborted.
    """
    try:
        deps.envelopes.update_worker_meta(
            inp.session_id,
            {"turnFinishing": inp.op_id},
            expect={"turnStatus": ["running"], "turnRunId": [inp.op_id]},
        )
        return True
    except EnvelopeConflictError:
        return not cancelling(deps.envelopes.get(inp.session_id), inp.op_id)


def fail_turn(deps: HarnessDeps, inp: FailTurnInput) -> TurnResult:
    """End the turn as failed with `error` (the Catch target); idempotent."""
    with open_session(deps, inp.session_id) as storage:
        state = load_state(storage, inp.op_id)
        if state is None:
            if load_record(storage, inp.op_id) is None and _claimed(deps, inp):
                return result_of(inp.session_id, _fail_unstarted(deps, storage, inp))
            return _repeat_terminal(deps, storage, inp.session_id, inp.op_id)
        record = commit_terminal(deps, storage, state, "failed", clip(inp.error))
        return result_of(inp.session_id, record)


def _claimed(deps: HarnessDeps, inp: FailTurnInput) -> bool:
    envelope = deps.envelopes.get(inp.session_id)
    meta = envelope.meta if envelope is not None else {}
    return turn_run_id(meta) == inp.op_id and turn_status(meta) not in STARTABLE_STATUSES


def _fail_unstarted(deps: HarnessDeps, storage: Storage, inp: FailTurnInput) -> TurnRecord:
    # start_turn claimed the session and died before its first commit: nothing of the turn is
    # stored. Record the failure so the session can take a new turn (and a late redelivery of
    # start_turn finds the record instead of starting).
    record = TurnRecord(
        op_id=inp.op_id, status="failed", error=clip(inp.error), finished_at=deps.clock()
    )
    result = storage.commit(
        [
            set_value(result_address(inp.op_id), record.model_dump(mode="json")),
            retire_scope(op_scope(inp.op_id)),
        ]
    )
    envelope_terminal(deps, inp.session_id, record, result.seqs[-1])
    return record


def abort_turn(deps: HarnessDeps, session_id: str, op_id: str) -> TurnResult:
    """End the turn as aborted now (what a step does when it observes a cancel)."""
    with open_session(deps, session_id) as storage:
        state = load_state(storage, op_id)
        if state is None:
            return _repeat_terminal(deps, storage, session_id, op_id)
        return result_of(session_id, commit_terminal(deps, storage, state, "aborted", "cancelled"))


def cancel_turn(deps: HarnessDeps, session_id: str, op_id: str | None = None) -> CancelResult:
    """Ask the running turn to stop: status `cancelling`; its next step aborts it.

    The result says `cancelling` only when the cancel will take effect. A turn that already
    ended is left as it is: the result carries its terminal status (and the envelope is
    repaired if a lost update still said it runs); a turn whose completion is already being
    committed (`turnFinishing`) answers `running` and completes.
    """
    envelope = deps.envelopes.get(session_id)
    if envelope is None:
        raise SessionNotFoundError(f"session {session_id!r} does not exist")
    running = turn_run_id(envelope.meta)
    target = op_id if op_id is not None else running
    if not isinstance(target, str):
        raise OperationNotFoundError(f"session {session_id!r} has no turn to cancel")
    with open_session(deps, session_id) as storage:
        record = settle_envelope(deps, storage, session_id, target)
        if record is not None:
            return CancelResult(session_id=session_id, op_id=target, status=record.status)
        try:
            deps.envelopes.update_worker_meta(
                session_id,
                {"turnStatus": "cancelling"},
                # Not once finish_turn has fenced its completion: the cancel could not win.
                expect={
                    "turnStatus": ["running", "awaiting_approval"],
                    "turnRunId": [target],
                    "turnFinishing": [None],
                },
            )
            status = "cancelling"
        except EnvelopeConflictError:
            current = deps.envelopes.get(session_id)
            meta = current.meta if current is not None else {}
            if turn_run_id(meta) != target:
                raise OperationNotFoundError(
                    f"operation {target!r} is not the current turn of session {session_id!r}"
                ) from None
            status = str(turn_status(meta))
        if status == "cancelling":
            # The terminal commit may have landed between the read above and the mark: then
            # the cancel cannot take effect, and the envelope is put back to the real outcome.
            record = settle_envelope(deps, storage, session_id, target)
            if record is not None:
                status = record.status
            else:
                # Its sub-agents' running child turns stop too (docs/agent.md, "Sub-agents").
                children = cancel_children(deps, storage, session_id, target)
                # Paused with no call of its own parked: it waited for a child's approval.
                for_child = turn_status(envelope.meta) == "awaiting_approval"
                parked = _abort_if_parked(
                    deps, storage, session_id, target, waits_for_child=for_child
                )
                tokens = [*parked.wake_tokens, *children]
                return parked.model_copy(update={"wake_tokens": tokens})
    return CancelResult(session_id=session_id, op_id=target, status=status)


def _abort_if_parked(
    deps: HarnessDeps,
    storage: Storage,
    session_id: str,
    op_id: str,
    *,
    waits_for_child: bool = False,
) -> CancelResult:
    """A turn waiting for a person (its own call's decision, or `waits_for_child`: a child
    turn's, locally) has no step that would observe the cancel: abort it now.

    Its waits (Step Functions task tokens) are returned so the caller releases them; the
    execution's next step then finds the turn ended. A turn that is not parked is left to its
    next step, as before.
    """
    state = load_state(storage, op_id)
    if state is None or not (waits_for_child or awaiting_calls(storage, state)):
        return CancelResult(session_id=session_id, op_id=op_id, status="cancelling")
    tokens = tokens_of(storage, state)  # read before the terminal commit retires the scope
    if waits_for_child:
        # Its waits for child executions too: the cancelled children end without it.
        tokens += child_tokens_of(storage, state)
    record = commit_terminal(deps, storage, state, "aborted", "cancelled by request")
    return CancelResult(
        session_id=session_id, op_id=op_id, status=record.status, wake_tokens=tokens
    )


def commit_terminal(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    status: TerminalStatus,
    error: str | None,
    *,
    unsettled_frames: bool = True,
) -> TurnRecord:
    """The one fenced terminal commit plus its envelope write; the first terminal step wins."""
    writes, record = terminal_writes(
        storage, state, status, error, deps.clock(), unsettled_frames=unsettled_frames
    )
    try:
        # The envelope mirror rides in the same request where it can.
        commit_mirrored(
            deps,
            storage,
            writes,
            guard=op_address(state.op_id),
            patch_for=lambda seqs: terminal_patch(record, seqs[-1]),
            expect={"turnRunId": [state.op_id]},
        )
    except GuardFailedError:
        return _terminal_winner(deps, storage, state)
    _turn_span(deps, state, record)
    return record


def _turn_span(deps: HarnessDeps, state: OperationState, record: TurnRecord) -> None:
    # Only the step whose terminal commit landed emits the turn span: once per turn.
    genai.turn_span(
        state.trace_parent,
        session_id=state.session_id,
        op_id=state.op_id,
        agent_name=deps.agent.name,
        started_at=state.started_at,
        finished_at=record.finished_at,
        status=record.status,
        rounds=record.rounds,
        usage=record.usage,
    )


def _terminal_winner(deps: HarnessDeps, storage: Storage, state: OperationState) -> TurnRecord:
    """Another step's terminal commit landed first: its record is the outcome."""
    winner = load_record(storage, state.op_id)
    if winner is None:
        raise no_operation(state.session_id, state.op_id) from None
    envelope_terminal(deps, state.session_id, winner, None)
    return winner


def _repeat_terminal(
    deps: HarnessDeps, storage: Storage, session_id: str, op_id: str
) -> TurnResult:
    record = settle_envelope(deps, storage, session_id, op_id)  # finish a lost envelope update
    if record is None:
        raise no_operation(session_id, op_id)
    return result_of(session_id, record)


def turn_result(deps: HarnessDeps, session_id: str, op_id: str) -> TurnResult | None:
    """The terminal result of `op_id`, or None while it runs (repairs a lost envelope update)."""
    with open_session(deps, session_id) as storage:
        record = settle_envelope(deps, storage, session_id, op_id)
        return None if record is None else result_of(session_id, record)


def reconcile_envelope(
    deps: HarnessDeps, envelope: Envelope, storage: Storage | None = None
) -> Envelope:
    """`envelope`, first repaired if it says a turn runs that storage says has ended.

    For readers of the envelope (the API, server start-up): one storage read while a turn is
    marked running or cancelling, none otherwise (none either when `storage`, an open handle
    of the session, read the turn's result ahead).
    """
    meta = envelope.meta
    op_id = turn_run_id(meta)
    if turn_status(meta) not in ACTIVE_STATUSES or not isinstance(op_id, str):
        return envelope
    try:
        validate_op_id(op_id)
    except StepInputError:
        return envelope  # not a turn (e.g. the API's delete marker)
    if storage is not None:
        if settle_envelope(deps, storage, envelope.session_id, op_id) is None:
            return envelope
    else:
        with open_session(deps, envelope.session_id) as handle:
            if settle_envelope(deps, handle, envelope.session_id, op_id) is None:
                return envelope
    return deps.envelopes.get(envelope.session_id) or envelope
