"""A turn that ended in storage while its envelope update was lost never blocks the session.

Deterministic reproduction of the kill between the terminal commit and the envelope write: the
envelope is set back to `running` after a completed turn. Every route and the local server's
start-up recovery must then see (and leave) the envelope saying the turn ended.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.api_client import ApiHarness, auth
from turnkeep.api.__main__ import resume_unfinished
from turnkeep.api.launch import LocalLauncher
from turnkeep.harness import run_turn
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings


def _stuck_session(api: ApiHarness, status: str = "running") -> tuple[str, str]:
    sid = api.session()
    turn = api.start(sid, "hello")
    meta = api.runtime.envelopes.get(sid)
    assert meta is not None
    assert meta.meta["turnStatus"] == "completed"
    api.runtime.envelopes.update_worker_meta(sid, {"turnStatus": status})
    return sid, turn


def _envelope_status(api: ApiHarness, sid: str) -> object:
    envelope = api.runtime.envelopes.get(sid)
    assert envelope is not None
    return envelope.meta["turnStatus"]


@pytest.mark.parametrize("stale", ["running", "cancelling"])
def test_a_new_turn_starts_in_a_session_whose_last_envelope_update_was_lost(
    api: ApiHarness, stale: str
) -> None:
    sid, first = _stuck_session(api, stale)

    response = api.client.post(f"/sessions/{sid}/turns", json={"text": "again"}, headers=auth())

    assert response.status_code == 202, response.text
    assert response.json()["turn_id"] != first


def test_the_session_view_shows_the_ended_turn_and_the_envelope_is_repaired(
    api: ApiHarness,
) -> None:
    sid, _turn = _stuck_session(api)

    one = api.client.get(f"/sessions/{sid}", headers=auth()).json()
    listed = api.client.get("/sessions", headers=auth()).json()["sessions"]

    assert one["turn"]["status"] == "completed"
    assert [s["turn"]["status"] for s in listed if s["session_id"] == sid] == ["completed"]
    assert _envelope_status(api, sid) == "completed"


def test_cancelling_an_ended_turn_answers_200_and_repairs_the_envelope(api: ApiHarness) -> None:
    sid, turn = _stuck_session(api)

    response = api.client.post(f"/sessions/{sid}/turns/{turn}/cancel", headers=auth())

    assert response.status_code == 200
    assert response.json() == {"turn_id": turn, "status": "completed", "cancel_requested": False}
    assert _envelope_status(api, sid) == "completed"


def test_a_session_whose_last_envelope_update_was_lost_can_be_deleted(api: ApiHarness) -> None:
    sid, _turn = _stuck_session(api)

    response = api.client.delete(f"/sessions/{sid}", headers=auth())

    assert response.status_code == 204, response.text
    assert api.client.get(f"/sessions/{sid}", headers=auth()).status_code == 404


def test_local_server_start_up_repairs_an_ended_turn_instead_of_relaunching_it(
    tmp_path: Path,
) -> None:
    runtime = build_runtime(TurnkeepSettings(local_dir=tmp_path), provider=ScriptedProvider())
    try:
        runtime.envelopes.create("lost-update", "u1")
        run_turn(runtime.deps, "lost-update", "u1", "hello", op_id="op-ended")
        runtime.envelopes.update_worker_meta("lost-update", {"turnStatus": "running"})
        launcher = LocalLauncher(runtime.deps)
        try:
            assert resume_unfinished(runtime, launcher) == []
        finally:
            launcher.shutdown()
        envelope = runtime.envelopes.get("lost-update")
        assert envelope is not None
        assert envelope.meta["turnStatus"] == "completed"
    finally:
        runtime.close()
