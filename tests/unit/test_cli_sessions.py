"""`turnkeep sessions`: what the local store holds, without adding to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnkeep import cli
from turnkeep.harness import StartTurnInput, start_turn
from turnkeep.harness.local_owner import current_owner, record_owner
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("TURNKEEP_MODEL", "TURNKEEP_STORAGE_URL", "TURNKEEP_ENVELOPE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TURNKEEP_LOCAL_DIR", str(tmp_path / ".local"))


def test_listing_a_fresh_jsonl_store_creates_no_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TURNKEEP_STORAGE_URL", f"jsonl://{tmp_path / 'data'}")

    assert cli.main(["sessions", "list"]) == 0
    assert cli.main(["sessions", "list"]) == 0

    assert (
        capsys.readouterr().out.splitlines() == [f"no sessions in jsonl://{tmp_path / 'data'}"] * 2
    )


def test_delete_refuses_a_session_whose_turn_a_live_process_drives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = build_runtime(TurnkeepSettings(local_dir=tmp_path / ".local"))
    try:
        runtime.envelopes.create("s-busy", "u1")
        with runtime.deps.open_storage("s-busy") as storage:
            record_owner(storage, "op-live", current_owner())
        start_turn(
            runtime.deps,
            StartTurnInput(session_id="s-busy", op_id="op-live", user_id="u1", text="hi"),
        )
    finally:
        runtime.close()

    assert cli.main(["sessions", "delete", "s-busy"]) == 1
    assert cli.main(["sessions", "show", "s-busy"]) == 0
    assert cli.main(["sessions", "notes", "nosuch"]) == 1

    out = capsys.readouterr().out
    assert "session s-busy has a turn running (driven by pid" in out
    assert "not deleted" in out
    assert "turn     op-live: running (driven by pid" in out
    assert "no session 'nosuch'" in out
