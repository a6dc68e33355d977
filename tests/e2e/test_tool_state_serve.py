"""The pantry scenario on `turnkeep serve`, whose tools run in worker processes: `put_away`
then `check_stock` gives the same quantity (module-level state would give 0 there), the state
survives a server restart, deps are built in the worker, and DELETE of the session removes it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.real_server import RealServer, repo_pythonpath

ALICE = {"Authorization": "Bearer dev-alice"}
AGENT = "tests.support.pantry_tools:agent"


def _turn(client: httpx.Client, sid: str, text: str) -> list[dict[str, Any]]:
    started = client.post(f"/sessions/{sid}/turns", json={"text": text})
    assert started.status_code == 202, started.text
    turn = started.json()["turn_id"]
    deadline = time.monotonic() + 60
    while client.get(f"/sessions/{sid}/turns/{turn}").json()["status"] == "running":
        assert time.monotonic() < deadline, "the turn did not end"
        time.sleep(0.05)
    page = client.get(f"/sessions/{sid}/turns/{turn}/events", params={"limit": 100}).json()
    return [p for e in page["events"] if e.get("role") == "tool" for p in e["parts"]]


def _server(tmp_path: Path) -> RealServer:
    return RealServer(
        tmp_path / "local",
        command=[sys.executable, "-m", "turnkeep.cli", "serve", "--agent", AGENT],
        extra_env={"PYTHONPATH": repo_pythonpath(), "TURNKEEP_TOOL_WORKERS": "2"},
    )


def test_tool_state_under_serves_worker_processes_survives_a_restart_and_the_session_delete(
    tmp_path: Path,
) -> None:
    server = _server(tmp_path)
    url = server.start()
    try:
        with httpx.Client(base_url=url, headers=ALICE, timeout=30) as client:
            client.post("/sessions", json={"session_id": "pantry"}).raise_for_status()
            _turn(client, "pantry", 'call put_away {"item": "rice", "qty": 2}')
            (stock,) = _turn(client, "pantry", 'call check_stock {"item": "rice"}')
            (who,) = _turn(client, "pantry", "call whoami {}")
        server_pid = server.process.pid if server.process is not None else -1
    finally:
        server.stop()

    assert stock["content"] == "rice: qty 2"
    seen = json.loads(who["content"])
    assert seen["pid"] != server_pid  # it ran in a worker process
    assert seen["deps_pid"] == seen["pid"]  # whose own factory call built its deps
    assert (seen["session_id"], seen["user_id"], seen["shop"]) == ("pantry", "alice", "corner shop")

    again = _server(tmp_path)
    url = again.start()
    try:
        with httpx.Client(base_url=url, headers=ALICE, timeout=30) as client:
            (after_restart,) = _turn(client, "pantry", 'call check_stock {"item": "rice"}')
            assert client.delete("/sessions/pantry").status_code == 204
            client.post("/sessions", json={"session_id": "pantry"}).raise_for_status()
            (after_delete,) = _turn(client, "pantry", 'call check_stock {"item": "rice"}')
    finally:
        again.stop()

    assert after_restart["content"] == "rice: qty 2"
    assert after_delete["content"] == "rice: qty 0"
