"""The pantry scenario in-process: `put_away` in one turn, `check_stock` in the next gives the
same quantity; the state survives a new process on SQLite, is gone with the session, a write
over a cap is the tool's error result, and a call interrupted mid-run commits no writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.integration.turns_support import USER, SimulatedCrash, make_turn_harness
from tests.support import pantry_tools as pantry
from tests.support.real_server import ROOT, repo_pythonpath
from turnkeep import Tool, ToolContext, ToolResult
from turnkeep.harness import (
    ModelStepInput,
    StartTurnInput,
    ToolStepInput,
    model_step,
    run_turn,
    start_turn,
    tool_step,
)
from turnkeep.providers.base import ToolResultPart
from turnkeep.storage import open_repository, open_storage
from turnkeep.tools.state import load_state


class NoArgs(BaseModel):
    pass


def _last_result(h: object) -> ToolResultPart:
    parts = [p for m in h.transcript() for p in m.parts if isinstance(p, ToolResultPart)]  # type: ignore[attr-defined]
    return parts[-1]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_put_away_then_check_stock_gives_the_same_quantity_in_process(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    h.deps.agent = pantry.agent

    run_turn(h.deps, h.session_id, USER, 'call put_away {"item": "rice", "qty": 2}')
    run_turn(h.deps, h.session_id, USER, 'call check_stock {"item": "rice"}')

    assert _last_result(h).content == "rice: qty 2"
    with h.storage() as storage:
        assert load_state(storage) == {"stock": {"rice": 2}}


def test_the_context_names_the_session_user_turn_and_call_and_builds_deps_once(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = pantry.agent

    result = run_turn(h.deps, h.session_id, USER, "call whoami {}\ncall whoami {}")

    seen = [
        json.loads(p.content)
        for m in h.transcript()
        for p in m.parts
        if isinstance(p, ToolResultPart)
    ]
    assert [s["session_id"] for s in seen] == [h.session_id] * 2
    assert {s["user_id"] for s in seen} == {USER}
    assert {s["turn_id"] for s in seen} == {result.op_id}
    assert len({s["call_id"] for s in seen}) == 2
    assert {s["shop"] for s in seen} == {"corner shop"}
    assert len(set(pantry.FACTORY_CALLS)) == len(pantry.FACTORY_CALLS) == 1  # once here


CHECK_IN_A_NEW_PROCESS = """
import sys
from tests.integration.turns_support import USER
from tests.support import pantry_tools as pantry
from turnkeep.envelope import open_envelope_store
from turnkeep.harness import HarnessDeps, run_turn
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import open_storage
url, sid = sys.argv[1], sys.argv[2]
envelopes = open_envelope_store("memory://fresh")
envelopes.create(sid, USER)
deps = HarnessDeps(
    open_storage=lambda s: open_storage(url, s),
    envelopes=envelopes,
    provider=ScriptedProvider(),
    agent=pantry.agent,
)
run_turn(deps, sid, USER, 'call check_stock {"item": "rice"}')
print("state-checked")
"""


def test_the_state_survives_a_new_process_and_is_gone_after_the_session_is_deleted(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path, "sqlite")
    h.deps.agent = pantry.agent
    run_turn(h.deps, h.session_id, USER, 'call put_away {"item": "rice", "qty": 2}')

    done = subprocess.run(
        [sys.executable, "-c", CHECK_IN_A_NEW_PROCESS, h.storage_url, h.session_id],
        cwd=ROOT,
        env={"PYTHONPATH": repo_pythonpath(), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _last_result(h).content == "rice: qty 2"  # the new process's turn read the state

    repository = open_repository(h.storage_url)
    try:
        repository.delete_session(h.session_id)
    finally:
        repository.close()
    with open_storage(h.storage_url, h.session_id) as storage:
        assert load_state(storage) == {}


def test_a_write_over_a_cap_is_the_tools_error_result_and_keeps_nothing(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = pantry.agent

    result = run_turn(h.deps, h.session_id, USER, 'call hoard {"kib": 40}')

    assert result.status == "completed"
    failed = _last_result(h)
    assert failed.is_error
    assert "ToolStateError: state.set('note'): the value is 40962 bytes as JSON" in failed.content
    assert "over the limit of 16384 bytes per value" in failed.content
    with h.storage() as storage:
        assert load_state(storage) == {}


def test_a_deleted_key_and_a_rewritten_value_are_what_the_next_turn_reads(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = pantry.agent
    run_turn(
        h.deps,
        h.session_id,
        USER,
        'call put_away {"item": "rice", "qty": 2}\ncall hoard {"kib": 1}',
    )

    run_turn(h.deps, h.session_id, USER, 'call use_up {"item": "rice"}')

    with h.storage() as storage:
        assert load_state(storage) == {"stock": {}}


def _visiting_tool(*, replay_safe: bool) -> tuple[Tool[NoArgs], list[int]]:
    """Counts visits in the state; its first run dies after the write (a crash mid-call)."""
    runs: list[int] = []

    def handler(_args: NoArgs, ctx: ToolContext) -> ToolResult:
        runs.append(1)
        visits = ctx.state.get("visits", 0)
        assert isinstance(visits, int)
        ctx.state.set("visits", visits + 1)
        if len(runs) == 1:
            raise SimulatedCrash
        return ToolResult(f"visits: {visits + 1}")

    return Tool("visit", "count a visit", NoArgs, handler, replay_safe=replay_safe), runs


@pytest.mark.parametrize("replay_safe", [True, False], ids=["replay-safe", "not-replay-safe"])
def test_a_call_interrupted_mid_run_commits_none_of_its_state_writes(
    tmp_path: Path, replay_safe: bool
) -> None:
    tool, runs = _visiting_tool(replay_safe=replay_safe)
    h = make_turn_harness(tmp_path, "sqlite", tools=[tool])
    start_turn(
        h.deps,
        StartTurnInput(session_id=h.session_id, op_id="op-v", user_id=USER, text="call visit {}"),
    )
    call_id = model_step(
        h.deps, ModelStepInput(session_id=h.session_id, op_id="op-v", round=0)
    ).call_ids[0]
    step = ToolStepInput(session_id=h.session_id, op_id="op-v", call_id=call_id)

    with pytest.raises(SimulatedCrash):
        tool_step(h.deps, step)
    again = tool_step(h.deps, step)  # the step retried, as after a crash

    with h.storage() as storage:
        state = load_state(storage)
    if replay_safe:  # run again from the state before the first attempt: one visit, not two
        assert (len(runs), again.replayed, state) == (2, True, {"visits": 1})
    else:  # recorded as interrupted, not run again: the first attempt's write never happened
        assert (len(runs), again.interrupted, state) == (1, True, {})
