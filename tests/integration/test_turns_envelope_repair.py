"""A lost envelope update after the terminal commit never leaves a session stuck "running".

The crash window: the terminal commit landed in storage (the turn reads `completed`), the
process died before the envelope write. Reproduced deterministically by setting the envelope
back to `running` after a finished turn; every path that then finds the turn ended must leave
the envelope saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.turns_support import USER, Harness, make_turn_harness
from turnkeep.harness import (
    CancelResult,
    FailTurnInput,
    FinishTurnInput,
    ModelStepInput,
    StartTurnInput,
    ToolStepInput,
    abort_turn,
    cancel_turn,
    fail_turn,
    finish_turn,
    model_step,
    reconcile_envelope,
    resume_turn,
    run_turn,
    start_turn,
    tool_step,
    turn_result,
)
from turnkeep.harness.state import result_address

BACKENDS = ["memory", "sqlite"]


def _lose_envelope_update(h: Harness, status: str = "running") -> None:
    """What a kill between the terminal commit and the envelope write leaves behind."""
    h.envelopes.update_worker_meta(
        h.session_id, {"turnStatus": status, "turnFinishedAt": None, "turnError": None}
    )


def _ended_turn(h: Harness, status: str = "running") -> str:
    result = run_turn(h.deps, h.session_id, USER, "hello", op_id="op-1")
    assert result.status == "completed"
    _lose_envelope_update(h, status)
    assert h.meta()["turnStatus"] == status
    return "op-1"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("stale", ["running", "cancelling"])
def test_relaunching_an_ended_turn_repairs_its_envelope(
    tmp_path: Path, backend: str, stale: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    op = _ended_turn(h, stale)

    result = resume_turn(h.deps, h.session_id, op)

    assert result.status == "completed"
    meta = h.meta()
    assert meta["turnStatus"] == "completed"
    assert meta["turnFinishedAt"] is not None
    # the cursor points at the terminal commit, as the lost write would have set it
    with h.storage() as storage:
        stored = storage.get_value(result_address(op))
    assert stored is not None
    assert meta["turnStreamCursor"] == stored.seq


STEP_PATHS: dict[str, Callable[[Harness, str], Any]] = {
    "model_step": lambda h, op: model_step(
        h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=0)
    ),
    "later model_step": lambda h, op: model_step(
        h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=5)
    ),
    "tool_step": lambda h, op: tool_step(
        h.deps, ToolStepInput(session_id=h.session_id, op_id=op, call_id="c1")
    ),
    "finish_turn": lambda h, op: finish_turn(
        h.deps, FinishTurnInput(session_id=h.session_id, op_id=op)
    ),
    "fail_turn": lambda h, op: fail_turn(
        h.deps, FailTurnInput(session_id=h.session_id, op_id=op, error="x")
    ),
    "abort_turn": lambda h, op: abort_turn(h.deps, h.session_id, op),
    "turn_result": lambda h, op: turn_result(h.deps, h.session_id, op),
    "start_turn redelivery": lambda h, op: start_turn(
        h.deps, StartTurnInput(session_id=h.session_id, op_id=op, user_id=USER, text="hello")
    ),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", sorted(STEP_PATHS))
def test_every_step_that_finds_the_turn_ended_repairs_the_envelope(
    tmp_path: Path, backend: str, path: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    op = _ended_turn(h)

    STEP_PATHS[path](h, op)

    assert h.meta()["turnStatus"] == "completed"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancel_of_an_ended_turn_reports_its_outcome_and_never_marks_it_cancelling(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    op = _ended_turn(h)

    result = cancel_turn(h.deps, h.session_id, op)

    assert result == CancelResult(session_id=h.session_id, op_id=op, status="completed")
    assert h.meta()["turnStatus"] == "completed"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_new_turn_starts_after_an_ended_turn_whose_envelope_update_was_lost(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    _ended_turn(h)

    second = run_turn(h.deps, h.session_id, USER, "again", op_id="op-2")

    assert second.status == "completed"
    assert h.meta()["turnRunId"] == "op-2"
    assert h.meta()["turnStatus"] == "completed"


def test_reconciling_an_envelope_of_a_running_turn_changes_nothing(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path, "sqlite")
    start_turn(
        h.deps, StartTurnInput(session_id=h.session_id, op_id="op-1", user_id=USER, text="hi")
    )
    envelope = h.envelopes.get(h.session_id)
    assert envelope is not None

    assert reconcile_envelope(h.deps, envelope) == envelope
    assert h.meta()["turnStatus"] == "running"


def test_reconciling_repairs_an_envelope_left_running_by_a_lost_update(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path, "sqlite")
    _ended_turn(h)
    envelope = h.envelopes.get(h.session_id)
    assert envelope is not None

    repaired = reconcile_envelope(h.deps, envelope)

    assert repaired.meta["turnStatus"] == "completed"
    assert h.meta()["turnStatus"] == "completed"
