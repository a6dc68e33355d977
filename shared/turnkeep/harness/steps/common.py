"""Helpers the step modules share: opening session storage, error clipping, envelope writes,
and the repair of an envelope behind a terminal record. Internal to `turnkeep.harness.steps`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict

from turnkeep.envelope import Envelope, EnvelopeConflictError, MetaScalar, turn_run_id, turn_status
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.errors import OperationNotFoundError
from turnkeep.harness.io import TurnResult
from turnkeep.harness.live import drain_quietly, watch_commits
from turnkeep.harness.state import (
    OperationState,
    TurnRecord,
    result_address,
)
from turnkeep.providers.base import Usage
from turnkeep.providers.settings import ModelSettings
from turnkeep.storage import Storage

TURN_ERROR_MAX_CHARS = 1000


@contextmanager
def open_session(deps: HarnessDeps, session_id: str) -> Iterator[Storage]:
    """The session's storage for one step, closed when the step ends."""
    storage = deps.open_storage(session_id)
    if deps.live is not None:
        watch_commits(storage, deps.live)
    try:
        yield storage
    finally:
        storage.close()
        if deps.live is not None:
            drain_quietly(deps.live)  # what the step pushed has left before it returns


def no_operation(session_id: str, op_id: str) -> OperationNotFoundError:
    """The error for an operation with neither a running state nor a terminal record."""
    return OperationNotFoundError(f"session {session_id!r} has no operation {op_id!r}")


def clip(text: str) -> str:
    """`text` cut visibly to TURN_ERROR_MAX_CHARS (the envelope caps turnError)."""
    # Cut visibly, never silently.
    if len(text) <= TURN_ERROR_MAX_CHARS:
        return text
    return text[: TURN_ERROR_MAX_CHARS - 40] + f" … [{len(text)} characters, cut]"


def epoch_ms(seconds: float) -> int:
    """Epoch seconds as the envelope's epoch milliseconds."""
    return int(seconds * 1000)


def _usage_json(usage: Usage) -> str:
    return json.dumps(asdict(usage), separators=(",", ":"))


def cancelling(envelope: Envelope | None, op_id: str) -> bool:
    """Whether a cancel was requested for `op_id` (the next step aborts the turn)."""
    if envelope is None:
        return False
    meta = envelope.meta
    return turn_status(meta) == "cancelling" and turn_run_id(meta) == op_id


def terminal_patch(record: TurnRecord, cursor: int | None) -> dict[str, MetaScalar | None]:
    """The envelope mirror of a terminal record (and its commit's last sequence, if known)."""
    patch: dict[str, MetaScalar | None] = {
        "turnStatus": record.status,
        "turnError": record.error,
        "turnFinishedAt": epoch_ms(record.finished_at),
        "usage": _usage_json(record.usage),
        "turnStepCount": record.rounds,
    }
    if cursor is not None:
        patch["turnStreamCursor"] = cursor
    return patch


def envelope_terminal(
    deps: HarnessDeps, session_id: str, record: TurnRecord, cursor: int | None
) -> None:
    """Mirror a terminal record into the envelope while `record.op_id` still owns it."""
    # A later turn may own the envelope now; storage holds this turn's record either way.
    with suppress(EnvelopeConflictError):
        deps.envelopes.update_worker_meta(
            session_id, terminal_patch(record, cursor), expect={"turnRunId": [record.op_id]}
        )


def ended_record(storage: Storage, op_id: str) -> tuple[TurnRecord, int] | None:
    """The terminal record of `op_id` with the sequence of its commit, or None while it runs."""
    stored = storage.get_value(result_address(op_id))
    if stored is None:
        return None
    return TurnRecord.model_validate(stored.value), stored.seq


def settle_envelope(
    deps: HarnessDeps, storage: Storage, session_id: str, op_id: str
) -> TurnRecord | None:
    """Make the envelope agree with `op_id`'s terminal record, if the turn has ended.

    A process killed between the terminal commit and its envelope write leaves the envelope
    saying `running` (or `cancelling`) for a turn that storage says ended; every path that finds
    the turn ended calls this, so the session is never blocked by it (docs/harness.md).
    Returns the record (None while the turn runs or never existed).
    """
    found = ended_record(storage, op_id)
    if found is None:
        return None
    record, seq = found
    envelope = deps.envelopes.get(session_id)
    if envelope is not None and envelope_disagrees(envelope, record):
        envelope_terminal(deps, session_id, record, seq)
    return record


def envelope_disagrees(envelope: Envelope, record: TurnRecord) -> bool:
    """Whether the envelope still names `record`'s turn with another status than its own."""
    meta = envelope.meta
    return turn_run_id(meta) == record.op_id and turn_status(meta) != record.status


def progress_patch(cursor: int, state: OperationState) -> dict[str, MetaScalar | None]:
    """The envelope mirror of a settled round: cursor, usage, step count."""
    return {
        "turnStreamCursor": cursor,
        "usage": _usage_json(state.usage),
        "turnStepCount": state.round,
    }


def result_of(session_id: str, record: TurnRecord) -> TurnResult:
    """The step output of a terminal record."""
    return TurnResult(
        session_id=session_id,
        op_id=record.op_id,
        status=record.status,
        error=record.error,
        error_code=record.error_code,
        final_entry_id=record.final_entry_id,
        rounds=record.rounds,
        usage=record.usage,
        subagent_usage=record.subagent_usage,
        output=record.output,
    )


def turn_model_settings(deps: HarnessDeps, state: OperationState) -> ModelSettings | None:
    """The model settings the turn runs with: recorded at its start, else the agent's (None:
    the defaults, so the provider's spec options apply)."""
    recorded = state.model_settings
    settings = (
        ModelSettings.model_validate(recorded)
        if recorded is not None
        else deps.agent.model_settings
    )
    return settings if settings != ModelSettings() else None
