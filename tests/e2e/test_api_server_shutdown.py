"""SIGTERM to `turnkeep serve` shuts it down cleanly: the tool worker pool and the stores are
closed before the process ends (no leaked-semaphore warning), with the shell's status 143."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx

from tests.support.real_server import RealServer

ALICE = {"Authorization": "Bearer dev-alice"}


def test_sigterm_after_a_tool_ran_in_a_worker_ends_serve_cleanly(tmp_path: Path) -> None:
    server = RealServer(
        tmp_path / "data",
        command=[sys.executable, "-m", "turnkeep.cli", "serve"],
        extra_env={"TURNKEEP_TOOL_WORKERS": "1"},
    )
    url = server.start()
    try:
        with httpx.Client(base_url=url, headers=ALICE, timeout=30) as client:
            client.post("/sessions", json={"session_id": "s-term"}).raise_for_status()
            started = client.post(
                "/sessions/s-term/turns", json={"text": 'call calculator {"expression": "6*7"}'}
            )
            turn = started.json()["turn_id"]
            deadline = time.monotonic() + 60
            status = "running"
            while status == "running" and time.monotonic() < deadline:
                time.sleep(0.05)
                status = client.get(f"/sessions/s-term/turns/{turn}").json()["status"]
        assert status == "completed"
    finally:
        server.stop()

    assert server.process is not None
    assert server.process.returncode == 143
    time.sleep(0.5)  # the resource tracker writes its warning as the last process goes
    stderr = "".join(server.stderr)
    assert "leaked semaphore" not in stderr, stderr
    assert "Traceback" not in stderr, stderr
