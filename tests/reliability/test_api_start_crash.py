"""The local server killed inside a turn start (after `start_turn` claimed the session, before
the orchestrator took the turn): the next start-up must end the turn, not leave it running.

The request runs through the real app (TestClient) over SQLite with the real `LocalLauncher`;
the kill is simulated right after `start_turn` returns, while the process's owner identity
names an exited process (as a killed server's would).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.crash_points import ProcessDeath
from tests.support.reliability import dead_owner
from turnkeep.api.app import create_app
from turnkeep.api.auth import LocalDevAuthenticator
from turnkeep.api.launch import LocalLauncher
from turnkeep.api.serve import resume_unfinished
from turnkeep.runtime.build import Runtime, build_runtime
from turnkeep.runtime.settings import TurnkeepSettings

AUTH = {"Authorization": "Bearer dev-alice"}


def _runtime(root: Path) -> Runtime:
    url = f"sqlite:///{root / 'turnkeep.db'}"
    return build_runtime(TurnkeepSettings(storage_url=url, envelope_url=url, local_dir=root))


def test_a_server_killed_right_after_start_turn_has_the_turn_ended_by_its_next_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = _runtime(tmp_path)
    launcher = LocalLauncher(runtime.deps, workers=1)
    client = TestClient(create_app(runtime, launcher, LocalDevAuthenticator()))
    sid = client.post("/sessions", json={"title": "t"}, headers=AUTH).json()["session_id"]
    from turnkeep.harness import local_owner
    from turnkeep.harness.steps import begin

    real_start = begin.start_turn

    def start_then_die(*args: Any, **kwargs: Any) -> Any:
        real_start(*args, **kwargs)
        raise ProcessDeath("killed after start_turn")

    monkeypatch.setattr(begin, "start_turn", start_then_die)
    monkeypatch.setattr(local_owner, "current_owner", dead_owner)  # the dying server
    with pytest.raises(ProcessDeath):
        client.post(f"/sessions/{sid}/turns", json={"text": "hello"}, headers=AUTH)
    monkeypatch.undo()
    launcher.shutdown(wait=False)
    runtime.close()

    restarted = _runtime(tmp_path)
    relauncher = LocalLauncher(restarted.deps, workers=1)
    try:
        resumed = resume_unfinished(restarted, relauncher)
        assert relauncher.wait_idle(30)
        envelope = restarted.envelopes.get(sid)
    finally:
        relauncher.shutdown()
        restarted.close()

    assert len(resumed) == 1
    assert envelope is not None
    assert envelope.meta["turnStatus"] == "completed"
