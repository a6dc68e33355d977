"""Approvals end to end on the real local server (uvicorn on 127.0.0.1, SQLite): a turn pauses,
the decision resumes it and the tool runs once; deny; a request nobody answers times out; a
server killed while a turn waits lists the request after restart and the decision resumes it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.real_server import RealServer

ALICE = {"Authorization": "Bearer dev-alice"}
BOB = {"Authorization": "Bearer dev-bob"}

pytestmark = pytest.mark.slow


@contextmanager
def _server(data: Path, **extra_env: str) -> Iterator[tuple[str, RealServer]]:
    server = RealServer(data, extra_env={"TURNKEEP_TOOL_WORKERS": "1", **extra_env})
    try:
        yield server.start(), server
    finally:
        server.stop()


def _until(check: Callable[[], Any], what: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _paused(client: httpx.Client, text: str) -> tuple[str, str, dict[str, Any]]:
    sid = client.post("/sessions", json={}, headers=ALICE).json()["session_id"]
    put = client.put(f"/sessions/{sid}/meta", json={"toolApproval": "echo"}, headers=ALICE)
    assert put.status_code == 200, put.text
    started = client.post(f"/sessions/{sid}/turns", json={"text": text}, headers=ALICE)
    assert started.status_code == 202, started.text
    turn = started.json()["turn_id"]
    pending = _until(
        lambda: client.get("/approvals", headers=ALICE).json()["approvals"], "the approval"
    )
    return sid, turn, pending[0]


def _finished(client: httpx.Client, sid: str, turn: str) -> dict[str, Any]:
    view: dict[str, Any] = _until(
        lambda: (
            (v := client.get(f"/sessions/{sid}/turns/{turn}", headers=ALICE).json())["finished"]
            and v
        ),
        "the turn to end",
    )
    return view


def _tool_results(client: httpx.Client, sid: str, turn: str) -> list[dict[str, Any]]:
    page = client.get(f"/sessions/{sid}/turns/{turn}/events?limit=500", headers=ALICE).json()
    return [p for e in page["events"] if e.get("role") == "tool" for p in e["parts"]]


def test_a_turn_pauses_on_the_real_server_and_an_approval_runs_the_tool_once(
    tmp_path: Path,
) -> None:
    with _server(tmp_path / "data") as (url, _process), httpx.Client(base_url=url) as client:
        sid, turn, pending = _paused(client, 'call echo {"text": "ship it"}')
        status = client.get(f"/sessions/{sid}/turns/{turn}", headers=ALICE).json()["status"]
        blocked = client.post(f"/sessions/{sid}/turns", json={"text": "hi"}, headers=ALICE)
        other = client.post(
            f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
            json={"decision": "approve"},
            headers=BOB,
        )
        decided = client.post(
            f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
            json={"decision": "approve"},
            headers=ALICE,
        )
        view = _finished(client, sid, turn)
        results = _tool_results(client, sid, turn)

    assert status == "awaiting_approval"
    assert blocked.status_code == 409
    assert other.status_code == 404
    assert decided.status_code == 202, decided.text
    assert view["status"] == "completed"
    assert [r["content"] for r in results] == ["ship it"]


def test_a_denial_and_a_timeout_on_the_real_server(tmp_path: Path) -> None:
    env = {"TURNKEEP_APPROVAL_TIMEOUT_SECONDS": "3"}
    with _server(tmp_path / "data", **env) as (url, _p), httpx.Client(base_url=url) as client:
        sid, turn, pending = _paused(client, 'call echo {"text": "x"}')
        denied = client.post(
            f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
            json={"decision": "deny", "reason": "not now"},
            headers=ALICE,
        )
        _finished(client, sid, turn)
        [denial] = _tool_results(client, sid, turn)

        sid2, turn2, _pending2 = _paused(client, 'call echo {"text": "y"}')
        view = _finished(client, sid2, turn2)  # nobody answers: the server's timer denies it
        [timeout] = _tool_results(client, sid2, turn2)

    assert denied.status_code == 202
    assert "not now" in denial["content"]
    assert view["status"] == "completed"
    assert "timed out" in timeout["content"]


def test_a_server_killed_while_a_turn_waits_lists_it_after_restart_and_the_decision_resumes_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with _server(data) as (url, server), httpx.Client(base_url=url) as client:
        sid, turn, pending = _paused(client, 'call echo {"text": "after restart"}')
        server.kill9()  # a crash: no shutdown, nothing flushed on purpose

    with _server(data) as (url, _process), httpx.Client(base_url=url) as client:
        listed = client.get("/approvals", headers=ALICE).json()["approvals"]
        decided = client.post(
            f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
            json={"decision": "approve"},
            headers=ALICE,
        )
        view = _finished(client, sid, turn)
        results = _tool_results(client, sid, turn)
        again = client.post(
            f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
            json={"decision": "approve"},
            headers=ALICE,
        )

    assert [(p["turn_id"], p["call_id"]) for p in listed] == [(turn, pending["call_id"])]
    assert decided.status_code == 202
    assert view["status"] == "completed"
    assert [r["content"] for r in results] == ["after restart"]
    assert again.status_code == 409
