"""Ending a turn: finish, fail, abort (one fenced terminal commit, then one envelope write),
asking a running turn to stop (cancel), and reading a turn's terminal result."""

from __future__ import annotations

from turnkeep.envelope import EnvelopeConflictError
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.errors import (
    FencedWriteError,
    OperationNotFoundError,
    SessionNotFoundError,
)
from turnkeep.harness.io import CancelResult, FailTurnInput, FinishTurnInput, TurnResult
from turnkeep.harness.progress import fenced_commit
from turnkeep.harness.recovery import terminal_writes
from turnkeep.harness.state import (
    STARTABLE_STATUSES,
    OperationState,
    TerminalStatus,
    TurnRecord,
    load_record,
    load_state,
    op_scope,
    result_address,
)
from turnkeep.harness.steps.common import (
    cancelling,
    clip,
    envelope_terminal,
    no_operation,
    open_session,
    result_of,
)
from turnkeep.storage import Storage, retire_scope, set_value


def finish_turn(deps: HarnessDeps, inp: FinishTurnInput) -> TurnResult:
    """End the turn as completed (aborted if a cancel arrived); idempotent."""
    with open_session(deps, inp.session_id) as storage:
        state = load_state(storage, inp.op_id)
        if state is None:
            return _repeat_terminal(deps, storage, inp.session_id, inp.op_id)
        envelope = deps.envelopes.get(inp.session_id)
        if cancelling(envelope, state.op_id):
            record = commit_terminal(deps, storage, state, "aborted", "cancelled by request")
        else:
            record = commit_terminal(deps, storage, state, "completed", None)
        return result_of(inp.session_id, record)


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
    return meta.get("turnRunId") == inp.op_id and meta.get("turnStatus") not in STARTABLE_STATUSES


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
    """Ask the running turn to stop: status `cancelling`; its next step aborts it."""
    envelope = deps.envelopes.get(session_id)
    if envelope is None:
        raise SessionNotFoundError(f"session {session_id!r} does not exist")
    running = envelope.meta.get("turnRunId")
    target = op_id if op_id is not None else running
    if not isinstance(target, str):
        raise OperationNotFoundError(f"session {session_id!r} has no turn to cancel")
    try:
        deps.envelopes.update_worker_meta(
            session_id,
            {"turnStatus": "cancelling"},
            expect={"turnStatus": ["running"], "turnRunId": [target]},
        )
        status = "cancelling"
    except EnvelopeConflictError:
        current = deps.envelopes.get(session_id)
        meta = current.meta if current is not None else {}
        if meta.get("turnRunId") != target:
            raise OperationNotFoundError(
                f"operation {target!r} is not the current turn of session {session_id!r}"
            ) from None
        status = str(meta.get("turnStatus"))
    return CancelResult(session_id=session_id, op_id=target, status=status)


def commit_terminal(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    status: TerminalStatus,
    error: str | None,
) -> TurnRecord:
    """The one fenced terminal commit plus its envelope write; the first terminal step wins."""
    writes, record = terminal_writes(storage, state, status, error, deps.clock())
    try:
        result = fenced_commit(storage, state.op_id, writes)
    except FencedWriteError:
        # Another step's terminal commit landed first: its record is the outcome.
        winner = load_record(storage, state.op_id)
        if winner is None:
            raise no_operation(state.session_id, state.op_id) from None
        envelope_terminal(deps, state.session_id, winner, None)
        return winner
    envelope_terminal(deps, state.session_id, record, result.seqs[-1])
    return record


def _repeat_terminal(
    deps: HarnessDeps, storage: Storage, session_id: str, op_id: str
) -> TurnResult:
    record = load_record(storage, op_id)
    if record is None:
        raise no_operation(session_id, op_id)
    envelope = deps.envelopes.get(session_id)
    if (
        envelope is not None
        and envelope.meta.get("turnRunId") == op_id
        and envelope.meta.get("turnStatus") != record.status
    ):
        envelope_terminal(deps, session_id, record, None)  # finish a lost envelope update
    return result_of(session_id, record)


def turn_result(deps: HarnessDeps, session_id: str, op_id: str) -> TurnResult | None:
    """The terminal result of `op_id`, or None while it runs."""
    with open_session(deps, session_id) as storage:
        record = load_record(storage, op_id)
        return None if record is None else result_of(session_id, record)
