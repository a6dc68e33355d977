"""The first step of a turn: claim the session, record the user message, create the op state."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any

from turnkeep.envelope import EnvelopeConflictError, MetaScalar, turn_run_id, turn_status
from turnkeep.harness.approvals import latest_expiry
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.envelope_io import commit_with_envelope
from turnkeep.harness.errors import SessionNotFoundError, StepInputError, TurnConflictError
from turnkeep.harness.io import FailTurnInput, StartTurnInput, StartTurnOutput
from turnkeep.harness.state import (
    OperationState,
    head_address,
    load_head,
    load_state,
    op_address,
    user_entry_id,
    validate_op_id,
)
from turnkeep.harness.steps.common import clip, epoch_ms, open_session, settle_envelope
from turnkeep.harness.steps.terminal import fail_turn
from turnkeep.harness.transcript import entry_data
from turnkeep.providers.base import AttachmentPart, Message, TextPart
from turnkeep.storage import MESSAGE_ENTRY_TYPE, Storage, Write, insert_entry, set_value
from turnkeep.telemetry import new_trace_parent
from turnkeep.turn_rules import STARTABLE_STATUSES


def new_op_id() -> str:
    """A fresh operation id."""
    return f"op-{uuid.uuid4().hex}"


def start_turn(deps: HarnessDeps, inp: StartTurnInput) -> StartTurnOutput:
    """Claim the session (one running turn), record the user message, create the op state.

    Raises TurnConflictError when another turn runs, SessionNotFoundError without an envelope.
    """
    op = validate_op_id(inp.op_id)
    _recorded_settings(deps, inp)  # a refused setting fails before the session is claimed
    envelope = deps.envelopes.get(inp.session_id)
    if envelope is None:
        raise SessionNotFoundError(f"session {inp.session_id!r} does not exist")
    with open_session(deps, inp.session_id) as storage:
        if load_state(storage, op) is not None:
            return StartTurnOutput(session_id=inp.session_id, op_id=op, status="running")
        record = settle_envelope(deps, storage, inp.session_id, op)
        if record is not None:
            return StartTurnOutput(session_id=inp.session_id, op_id=op, status=record.status)
        meta = envelope.meta
        if not (turn_run_id(meta) == op and turn_status(meta) == "running"):
            _claim(deps, storage, inp.session_id, op)
        try:
            result = storage.commit(_first_writes(deps, storage, inp, op))
        except Exception as exc:
            deps.envelopes.update_worker_meta(
                inp.session_id,
                {"turnStatus": "failed", "turnError": clip(f"could not start: {exc}")},
                expect={"turnRunId": [op]},
            )
            raise
        deps.envelopes.update_worker_meta(
            inp.session_id, {"turnStreamCursor": result.seqs[-1]}, expect={"turnRunId": [op]}
        )
    return StartTurnOutput(session_id=inp.session_id, op_id=op, status="running")


def start_turn_attached(
    deps: HarnessDeps,
    storage: Storage,
    inp: StartTurnInput,
    *,
    owner_id: str,
    envelope_patch: Mapping[str, MetaScalar | None],
    envelope_expect: Mapping[str, Collection[MetaScalar | None]],
) -> StartTurnOutput:
    """A fresh turn's start in one request where the envelope shares `storage`'s table
    (`attachable`): the claim, `envelope_patch` and the first commit, atomically.

    For a new operation id (the API's); the claim needs a startable status and
    `envelope_expect`. `EnvelopeConflictError` / `EnvelopeNotFoundError`: nothing was
    written (the caller falls back to `start_turn`, which handles every case).
    """
    op = validate_op_id(inp.op_id)
    writes = _first_writes(deps, storage, inp, op)
    claim = {**_claim_patch(deps, op), **envelope_patch}
    commit_with_envelope(
        deps,
        storage,
        writes,
        guard=None,
        patch_for=lambda seqs: {**claim, "turnStreamCursor": seqs[-1]},
        expect={"turnStatus": STARTABLE_STATUSES, **envelope_expect},
        owner_id=owner_id,
    )
    return StartTurnOutput(session_id=inp.session_id, op_id=op, status="running")


def _first_writes(deps: HarnessDeps, storage: Storage, inp: StartTurnInput, op: str) -> list[Write]:
    """The turn's first commit: the user message entry, the branch head, the op state."""
    now = deps.clock()
    state = OperationState(
        op_id=op,
        session_id=inp.session_id,
        user_id=inp.user_id,
        model=inp.model,
        model_settings=_recorded_settings(deps, inp),
        output_schema=_checked_output_schema(deps, inp),
        started_at=now,
        deadline_at=now + deps.limits.wall_clock_seconds,
        user_entry_id=user_entry_id(op),
        last_entry_id=user_entry_id(op),
        trace_parent=new_trace_parent(),
    )
    attached = tuple(
        AttachmentPart(a.attachment_id, a.name, a.media_type, a.size) for a in inp.attachments
    )
    message = Message("user", (TextPart(inp.text), *attached))
    return [
        insert_entry(
            state.user_entry_id,
            load_head(storage),
            MESSAGE_ENTRY_TYPE,
            entry_data(message, op=op, round=-1),
        ),
        set_value(head_address(), state.user_entry_id),
        set_value(op_address(op), state.model_dump(mode="json")),
    ]


def _recorded_settings(deps: HarnessDeps, inp: StartTurnInput) -> dict[str, Any] | None:
    """The settings the turn runs with, as recorded (ValueError for a refused override)."""
    try:
        merged = deps.agent.turn_model_settings(inp.model_settings)
    except ValueError as exc:
        raise StepInputError(str(exc)) from None
    recorded = merged.model_dump(mode="json", exclude_none=True)
    return recorded or None


def _checked_output_schema(deps: HarnessDeps, inp: StartTurnInput) -> dict[str, Any] | None:
    """The turn's own output schema once the agent allows and jsonschema accepts it."""
    try:
        deps.agent.turn_output(inp.output_schema)
    except ValueError as exc:
        raise StepInputError(str(exc)) from None
    return inp.output_schema


def _overdue_seconds(
    deps: HarnessDeps, storage: Storage, meta: Mapping[str, object], running: str
) -> float | None:
    """Seconds the running turn is past its deadline, if that exceeds the stale grace."""
    now = deps.clock()
    state = load_state(storage, running)
    if state is not None:
        deadline = state.deadline_at
        # A turn waiting for a person is not abandoned before its requests time out.
        deadline = max(deadline, latest_expiry(storage, state) or deadline)
    else:  # claimed, but its first commit never landed: measure from the claim
        started_ms = meta.get("turnStartedAt")
        if not isinstance(started_ms, int) or isinstance(started_ms, bool):
            return None
        deadline = started_ms / 1000 + deps.limits.wall_clock_seconds
    overdue = now - deadline
    return overdue if overdue > deps.limits.stale_turn_seconds else None


def _claim_patch(deps: HarnessDeps, op: str) -> dict[str, MetaScalar | None]:
    return {
        "turnStatus": "running",
        "turnRunId": op,
        "turnStartedAt": epoch_ms(deps.clock()),
        "turnFinishedAt": None,
        "turnError": None,
        "turnStreamCursor": None,
        "turnStepCount": 0,
        "usage": None,
        "turnFinishing": None,
    }


def _claim(deps: HarnessDeps, storage: Storage, session_id: str, op: str) -> None:
    patch = _claim_patch(deps, op)
    for attempt in range(2):
        try:
            deps.envelopes.update_worker_meta(
                session_id, patch, expect={"turnStatus": STARTABLE_STATUSES}
            )
            return
        except EnvelopeConflictError:
            current = deps.envelopes.get(session_id)
            meta = current.meta if current is not None else {}
            running = turn_run_id(meta)
            # A turn whose terminal commit landed but whose envelope update was lost is over:
            # repair the envelope from storage once, then claim again.
            if (
                attempt == 0
                and isinstance(running, str)
                and load_state(storage, running) is None
                and settle_envelope(deps, storage, session_id, running) is not None
            ):
                continue
            # A turn nobody drove to its end (orchestrator gone, its fail step failed too)
            # would block the session forever: past its deadline plus the stale grace, end it
            # honestly and take over.
            if attempt == 0 and isinstance(running, str):
                overdue = _overdue_seconds(deps, storage, meta, running)
                if overdue is not None:
                    fail_turn(
                        deps,
                        FailTurnInput(
                            session_id=session_id,
                            op_id=running,
                            error=f"abandoned: still running {overdue:.0f} s after its deadline "
                            "with no orchestrator driving it; ended when a new turn started",
                        ),
                    )
                    continue
            raise TurnConflictError(
                session_id,
                running if isinstance(running, str) else None,
                str(turn_status(meta)),
            ) from None
