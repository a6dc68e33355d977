"""Sub-agents under a real `turnkeep serve`: `kill -9` of the server while a child turn runs,
then a restart: the parent turn resumes, its sub-agent call resumes the same child turn, and
both end completed with nothing left running (docs/agent.md, "Sub-agents")."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.real_server import RealServer, repo_pythonpath
from turnkeep.harness.subagents import child_ids

ALICE = {"Authorization": "Bearer dev-alice"}
AGENT = "tests.support.subagent_agents:agent"


def _until(check: Any, what: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _ended(client: httpx.Client, sid: str, turn: str) -> dict[str, Any] | None:
    view: dict[str, Any] = client.get(f"/sessions/{sid}/turns/{turn}").json()
    return view if view.get("finished") else None


def test_kill_9_of_serve_mid_child_turn_resumes_the_child_and_both_complete(
    tmp_path: Path,
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    server = RealServer(
        tmp_path / "local",
        command=[sys.executable, "-m", "turnkeep.cli", "serve", "--agent", AGENT],
        extra_env={"PYTHONPATH": repo_pythonpath(), "SUBAGENT_FLAG_DIR": str(flags)},
    )
    try:
        server.start()
        with httpx.Client(base_url=server.url, headers=ALICE, timeout=10) as client:
            sid = client.post("/sessions", json={"title": "triage"}).json()["session_id"]
            task = json.dumps({"input": "call wait_for_go {}"})
            started = client.post(f"/sessions/{sid}/turns", json={"text": f"call writer {task}"})
            assert started.status_code == 202, started.text
            turn = started.json()["turn_id"]
            _until((flags / "started").exists, "the child's tool never started")
        server.kill9()  # mid-child: the child's tool call is running
        (flags / "go").touch()

        server.start()
        with httpx.Client(base_url=server.url, headers=ALICE, timeout=10) as client:
            view = _until(lambda: _ended(client, sid, turn), "the parent turn did not end")
            page = client.get(f"/sessions/{sid}/turns/{turn}/events", params={"limit": 100})
            events = page.json()["events"]
            (result_event,) = [e for e in events if e.get("role") == "tool" and not e.get("nested")]
            (result,) = result_event["parts"]
            child_sid, child_op = child_ids(sid, turn, result["call_id"])
            child = client.get(f"/sessions/{child_sid}/turns/{child_op}").json()
            # Child sessions are listed only when asked for (docs/agent.md, "Sub-agents").
            sessions = client.get("/sessions", params={"children": "true"}).json()["sessions"]
    finally:
        server.stop()

    assert view["status"] == "completed"
    assert result["name"] == "writer"
    assert result["content"] == "Tool wait_for_go returned: went"
    assert child["status"] == "completed"
    # The result event names the child turn (its own events are its session's).
    assert result_event["subagent"]["session_id"] == child_sid
    assert result_event["subagent"]["op_id"] == child_op
    assert result_event["subagent"]["status"] == "completed"
    assert view["subagent_usage"]["input_tokens"] == child["usage"]["input_tokens"]
    # The tool ran twice (the kill interrupted its first run): the child was resumed, not
    # started again, and nothing of either session is left running.
    assert (flags / "started").read_text().count("started") == 2
    statuses = {s["session_id"]: s["turn"]["status"] for s in sessions}
    assert statuses == {sid: "completed", child_sid: "completed"}
    assert server.tracebacks() == ""
