"""The model step's outputs that end or fail the turn, built from a terminal record or an
error. Internal to `turnkeep.harness.steps`."""

from __future__ import annotations

from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.io import ModelStepOutput
from turnkeep.harness.state import TurnRecord
from turnkeep.harness.steps.common import clip, no_operation, settle_envelope
from turnkeep.storage import Storage


def ended_output(
    deps: HarnessDeps, storage: Storage, session_id: str, op_id: str, round_: int
) -> ModelStepOutput:
    """The `done` output of a model step whose turn already ended (repairing the envelope)."""
    record = settle_envelope(deps, storage, session_id, op_id)
    if record is None:
        raise no_operation(session_id, op_id)
    return output_for_record(session_id, op_id, round_, record)


def output_for_record(
    session_id: str, op_id: str, round_: int, record: TurnRecord
) -> ModelStepOutput:
    """The `done` output of a model step, carrying the terminal record's status and error."""
    return ModelStepOutput(
        session_id=session_id,
        op_id=op_id,
        round=round_,
        next="done",
        next_round=round_,
        status=record.status,
        error=record.error,
    )


def fail_output(session_id: str, op_id: str, round_: int, error: str) -> ModelStepOutput:
    """The output that routes the turn to fail_turn with `error` (clipped)."""
    return ModelStepOutput(
        session_id=session_id,
        op_id=op_id,
        round=round_,
        next="fail",
        next_round=round_,
        error=clip(error),
    )
