"""`turnkeep sessions`: sub-agent child sessions are listed only with `--children` (with their
parent), and deleting the parent deletes them (docs/agent.md "Sub-agents")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnkeep import Agent, cli
from turnkeep.harness import run_turn
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("TURNKEEP_MODEL", "TURNKEEP_STORAGE_URL", "TURNKEEP_ENVELOPE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TURNKEEP_LOCAL_DIR", str(tmp_path / ".local"))


def _parent_with_child(tmp_path: Path) -> str:
    """The child session id of a stored session `s-parent` whose turn called a sub-agent."""
    runtime = build_runtime(TurnkeepSettings(local_dir=tmp_path / ".local"))
    try:
        runtime.deps.agent = Agent(name="triage", agents=[Agent(name="writer")])
        runtime.envelopes.create("s-parent", "u1", {"title": "release"})
        task = json.dumps({"input": "write it"})
        assert run_turn(runtime.deps, "s-parent", "u1", f"call writer {task}").status == (
            "completed"
        )
        return next(
            e.session_id
            for e in runtime.envelopes.list_for_owner("u1")
            if e.parent_session_id == "s-parent"
        )
    finally:
        runtime.close()


def test_sessions_list_shows_child_sessions_only_with_children_and_names_their_parent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    child = _parent_with_child(tmp_path)

    assert cli.main(["sessions", "list"]) == 0
    plain = capsys.readouterr().out.splitlines()
    assert cli.main(["sessions", "list", "--children"]) == 0
    full = capsys.readouterr().out.splitlines()

    assert [line.split()[0] for line in plain] == ["s-parent"]
    assert sorted(line.split()[0] for line in full) == sorted(["s-parent", child])
    (child_line,) = [line for line in full if line.startswith(child)]
    assert child_line.endswith("parent=s-parent")


def test_sessions_delete_of_the_parent_deletes_its_child_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    child = _parent_with_child(tmp_path)

    assert cli.main(["sessions", "delete", "s-parent"]) == 0
    said = capsys.readouterr().out
    assert cli.main(["sessions", "show", child]) == 1
    assert cli.main(["sessions", "list", "--children"]) == 0

    assert "deleted session s-parent and 1 sub-agent child session(s)" in said
    out = capsys.readouterr().out
    assert f"no session {child!r}" in out
    assert out.splitlines()[-1].startswith("no sessions in ")
