"""`python -m turnkeep.api` as a user runs it: a real uvicorn server on 127.0.0.1 (free port,
temp data dir, SQLite, scripted model, in-process orchestrator) driven over HTTP with httpx."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.real_server import RealServer

USER = {"Authorization": "Bearer dev-erin"}
TURN_TIMEOUT_S = 60.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    real = RealServer(tmp_path / "data")
    url = real.start()
    try:
        yield url
    finally:
        real.stop()
        errors = "".join(real.stderr)
        assert "Traceback" not in errors, errors
        assert (tmp_path / "data" / "turnkeep.db").exists()


def _run_turn(client: httpx.Client, sid: str, text: str) -> tuple[str, list[dict[str, Any]]]:
    """Start a turn and poll its events with the cursor until finished (bounded)."""
    started = client.post(f"/sessions/{sid}/turns", json={"text": text})
    assert started.status_code == 202, started.text
    turn = started.json()["turn_id"]
    events: list[dict[str, Any]] = []
    cursor = 0
    deadline = time.monotonic() + TURN_TIMEOUT_S
    while time.monotonic() < deadline:
        page = client.get(
            f"/sessions/{sid}/turns/{turn}/events", params={"cursor": cursor, "limit": 5}
        )
        assert page.status_code == 200, page.text
        body = page.json()
        events.extend(body["events"])
        cursor = body["next_cursor"]
        if body["finished"]:
            return turn, events
        if not body["events"]:
            time.sleep(0.02)
    pytest.fail(f"turn {turn} did not finish within {TURN_TIMEOUT_S} s")


def _reply(events: list[dict[str, Any]]) -> str:
    last = [e for e in events if e["kind"] == "entry" and e["role"] == "assistant"][-1]
    return "".join(p.get("text", "") for p in last["parts"])


def test_local_server_runs_turns_remembers_notes_and_deletes_the_session(server: str) -> None:
    with httpx.Client(base_url=server, headers=USER, timeout=30) as client:
        assert client.get("/sessions", headers={"Authorization": ""}).status_code == 401
        created = client.post("/sessions", json={"title": "e2e"})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]

        first, first_events = _run_turn(client, sid, "remember we chose SQLite")
        seqs = [e["seq"] for e in first_events]
        assert seqs == sorted(set(seqs))  # every event once, in order
        assert _reply(first_events) == "Noted."

        second, second_events = _run_turn(client, sid, "what do you remember?")
        assert "we chose SQLite" in _reply(second_events)
        status = client.get(f"/sessions/{sid}/turns/{second}").json()
        assert status["status"] == "completed"
        assert status["usage"]["output_tokens"] > 0

        notes = client.get(f"/sessions/{sid}/notes").json()
        assert notes["notes"] == "we chose SQLite"
        transcript = client.get(f"/sessions/{sid}/transcript", params={"limit": 1000}).json()
        texts = [p.get("text") for e in transcript["entries"] for p in e["parts"]]
        assert "remember we chose SQLite" in texts
        assert "what do you remember?" in texts
        assert transcript["has_more"] is False

        cancel = client.post(f"/sessions/{sid}/turns/{first}/cancel")
        assert cancel.status_code == 200
        assert cancel.json()["cancel_requested"] is False
        assert client.get(f"/sessions/{sid}/turns/{first}").json()["status"] == "completed"

        assert client.get("/openapi.json").status_code == 200
        other = client.get(f"/sessions/{sid}", headers={"Authorization": "Bearer dev-frank"})
        assert other.status_code == 404

        assert client.delete(f"/sessions/{sid}").status_code == 204
        assert client.get(f"/sessions/{sid}").status_code == 404
        assert client.get(f"/sessions/{sid}/transcript").status_code == 404
