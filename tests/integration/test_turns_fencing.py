"""Session commits of a step that loses a race with the terminal commit are refused, not replayed.

A model round or a second terminal step that read the operation state before another step ended
the turn must not write after that end: no resurrected operation state, no tool call left without
a result, no overwritten turn record.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.integration.turns_support import USER, StorageProxy, make_turn_harness
from turnkeep.harness import (
    FailTurnInput,
    FinishTurnInput,
    ModelStepInput,
    StartTurnInput,
    cancel_turn,
    fail_turn,
    finish_turn,
    model_step,
    start_turn,
)
from turnkeep.harness.state import (
    frames_scope,
    load_record,
    load_state,
    op_address,
    op_scope,
    response_id,
    result_address,
)
from turnkeep.providers.base import check_transcript
from turnkeep.storage import DeleteValue, InsertEntry, RetireScope, SetValue, Write

TWO_TOOLS = 'call calculator {"expression": "1+1"}\ncall echo {"text": "x"}'


def _writes_result(writes: Sequence[Write]) -> bool:
    return any(isinstance(w, SetValue) and w.address.namespace == "turn.result" for w in writes)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_model_round_settling_after_the_turn_ended_does_not_resurrect_the_operation(
    tmp_path: Path, backend: str
) -> None:
    op = "op-late-settle"
    ended: list[bool] = []
    holder: dict[str, object] = {}

    def end_turn_first(writes: Sequence[Write]) -> None:
        # A Catch (e.g. a task timeout) ends the turn between the end frame and the settlement.
        settling = any(isinstance(w, InsertEntry) and w.id == f"{op}:r0" for w in writes)
        if settling and not ended:
            ended.append(True)
            h = holder["h"]
            fail_turn(
                h.deps,  # type: ignore[attr-defined]
                FailTurnInput(
                    session_id=h.session_id,  # type: ignore[attr-defined]
                    op_id=op,
                    error="States.Timeout",
                ),
            )

    h = make_turn_harness(tmp_path, backend, open_wrapper=lambda s: StorageProxy(s, end_turn_first))
    holder["h"] = h
    start_turn(
        h.deps, StartTurnInput(session_id=h.session_id, op_id=op, user_id=USER, text=TWO_TOOLS)
    )

    out = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=0))

    assert ended == [True]
    assert out.next == "done"
    assert out.status == "failed"
    with h.storage() as storage:
        assert load_state(storage, op) is None  # not recreated by the late settlement
        record = load_record(storage, op)
        assert storage.get_stats().usage_rows == 0
    assert record is not None
    assert record.status == "failed"
    check_transcript(h.transcript())  # no tool call was left without a result
    assert h.meta()["turnStatus"] == "failed"


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_second_terminal_step_racing_the_first_does_not_overwrite_its_record(
    tmp_path: Path, backend: str
) -> None:
    op = "op-two-ends"
    raced: list[bool] = []
    holder: dict[str, object] = {}

    def fail_first(writes: Sequence[Write]) -> None:
        # finish_turn read the running state (and fenced its completion, so a cancel can no
        # longer abort it); another terminal step, a Catch's fail_turn, commits first.
        if _writes_result(writes) and not raced:
            raced.append(True)
            h = holder["h"]
            fail_turn(
                h.deps,  # type: ignore[attr-defined]
                FailTurnInput(session_id=h.session_id, op_id=op, error="caught"),  # type: ignore[attr-defined]
            )

    h = make_turn_harness(tmp_path, backend, open_wrapper=lambda s: StorageProxy(s, fail_first))
    holder["h"] = h
    start_turn(h.deps, StartTurnInput(session_id=h.session_id, op_id=op, user_id=USER, text="hi"))

    result = finish_turn(h.deps, FinishTurnInput(session_id=h.session_id, op_id=op))

    assert raced == [True]
    assert result.status == "failed"  # the first terminal commit wins and is reported
    with h.storage() as storage:
        record = load_record(storage, op)
    assert record is not None
    assert record.status == "failed"
    assert h.meta()["turnStatus"] == "failed"


def _end_by(h, how: str, op: str) -> None:  # type: ignore[no-untyped-def]
    if how == "finish":
        finish_turn(h.deps, FinishTurnInput(session_id=h.session_id, op_id=op))
    elif how == "fail":
        fail_turn(h.deps, FailTurnInput(session_id=h.session_id, op_id=op, error="boom"))
    else:
        cancel_turn(h.deps, h.session_id)
        model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=1))


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@pytest.mark.parametrize("how", ["finish", "fail", "abort"])
def test_the_terminal_commit_is_one_transaction_with_exactly_one_retire_scope(
    tmp_path: Path, backend: str, how: str
) -> None:
    proxies: list[StorageProxy] = []

    def wrap(storage):  # type: ignore[no-untyped-def]
        proxies.append(StorageProxy(storage, lambda _w: None))
        return proxies[-1]

    h = make_turn_harness(tmp_path, backend, open_wrapper=wrap)
    op = f"op-end-{how}"
    start_turn(
        h.deps, StartTurnInput(session_id=h.session_id, op_id=op, user_id=USER, text=TWO_TOOLS)
    )
    first = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=0))
    assert first.next == "tools"  # two calls stay unsettled: the terminal commit answers them

    _end_by(h, how, op)

    commits = [list(w) for p in proxies for w in p.committed]
    retiring = [w for w in commits if RetireScope(op_scope(op)) in w]
    assert len(retiring) == 1
    (terminal,) = retiring
    assert [x for x in terminal if isinstance(x, RetireScope)] == [RetireScope(op_scope(op))]
    # The settled round's frames went with its settlement (its own scope), not at the end.
    frames = [w for w in commits if RetireScope(frames_scope(response_id(op, 0))) in w]
    assert len(frames) == 1
    assert frames[0] is not terminal
    assert any(isinstance(x, SetValue) and x.address == result_address(op) for x in terminal)
    assert DeleteValue(op_address(op)) in terminal
    settled = [x.id for x in terminal if isinstance(x, InsertEntry)]
    assert settled == [f"{op}:r0:{c}" for c in first.call_ids]
    assert len({x for x in terminal if isinstance(x, DeleteValue)}) == 3  # op state + 2 calls
    check_transcript(h.transcript())
    assert h.scope_residue(op) == 0
