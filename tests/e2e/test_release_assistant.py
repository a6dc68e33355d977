"""The example agent (`turnkeep_agents.release_assistant:agent`) run as a user runs it: the
`turnkeep chat --agent` command in a process of its own, and `turnkeep serve --agent` (a real
server on 127.0.0.1) driven over HTTP — its sync and async function tools run, and its gated
tool waits for the person's approval before it publishes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.real_server import RealServer

AGENT = "turnkeep_agents.release_assistant:agent"
ALICE = {"Authorization": "Bearer dev-alice"}

pytestmark = pytest.mark.slow


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
    env["TURNKEEP_LOCAL_DIR"] = str(tmp_path / "local")
    env["RELEASE_ASSISTANT_LOG"] = str(tmp_path / "published.jsonl")
    return env


def test_turnkeep_chat_runs_the_example_agent_with_its_tools_and_an_approval(
    tmp_path: Path,
) -> None:
    stdin = (
        'call lookup_ticket {"ticket_id": "rel-101"}\n'
        'call check_ci {"branch": "release/2.4", "limit": 1}\n'
        'call lookup_ticket {"ticket_id": "REL-999"}\n'
        'call publish_release_notes {"version": "2.4.0", "notes": "- Apple Pay"}\ny\n'
        "/quit\n"
    )

    done = subprocess.run(
        [sys.executable, "-m", "turnkeep.cli", "chat", "--agent", AGENT, "--session", "rel-1"],
        input=stdin,
        env=_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "turnkeep chat: session rel-1 (agent release_assistant, model scripted)" in out
    assert '<- lookup_ticket [ok] {"id":"REL-101","title":"Checkout times out' in out
    assert '<- check_ci [ok] [{"run":8809,"commit":"77e1d03","status":"passed"' in out
    assert "<- lookup_ticket [error] Error: tool lookup_ticket failed: LookupError" in out
    assert "?? approval needed: tool call publish_release_notes" in out
    assert "<- publish_release_notes [ok] published 2.4.0 to the internal changelog" in out
    assert out.count(": completed, 2 model rounds") == 4
    (published,) = (tmp_path / "published.jsonl").read_text().splitlines()
    assert json.loads(published)["notes"] == "- Apple Pay"


def _until_ended(client: httpx.Client, sid: str, turn: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        view: dict[str, Any] = client.get(f"/sessions/{sid}/turns/{turn}").json()
        if view["status"] not in ("running", "cancelling"):
            return view
        time.sleep(0.05)
    raise AssertionError("the turn did not end")


def _tool_results(client: httpx.Client, sid: str, turn: str) -> list[dict[str, Any]]:
    page = client.get(f"/sessions/{sid}/turns/{turn}/events", params={"limit": 100}).json()
    return [p for e in page["events"] if e.get("role") == "tool" for p in e["parts"]]


def test_turnkeep_serve_runs_the_example_agent_over_http(tmp_path: Path) -> None:
    env = _env(tmp_path)
    server = RealServer(
        tmp_path / "local",
        command=[sys.executable, "-m", "turnkeep.cli", "serve", "--agent", AGENT],
        extra_env={"RELEASE_ASSISTANT_LOG": env["RELEASE_ASSISTANT_LOG"]},
    )
    url = server.start()
    try:
        with httpx.Client(base_url=url, headers=ALICE, timeout=30) as client:
            agent = client.get("/agent").json()
            assert agent["name"] == "release_assistant"
            assert agent["instructions"].startswith("You are the release assistant of ACME")
            assert agent["model_settings"] == {"max_tokens": 2048, "temperature": 0.2}
            gated = {t["name"]: t["requires_approval"] for t in agent["tools"]}
            assert gated["publish_release_notes"] is True
            assert gated["check_ci"] is False

            client.post("/sessions", json={"session_id": "rel-http"}).raise_for_status()
            started = client.post(
                "/sessions/rel-http/turns",
                json={
                    "text": 'call check_ci {"limit": 2}\n'
                    'call lookup_ticket {"ticket_id": "REL-103"}',
                    "model_settings": {"temperature": 0.0},
                },
            )
            assert started.status_code == 202, started.text
            turn = started.json()["turn_id"]
            assert _until_ended(client, "rel-http", turn)["status"] == "completed"
            ci, ticket = _tool_results(client, "rel-http", turn)
            assert json.loads(ci["content"])[0]["run"] == 8812
            assert json.loads(ticket["content"])["status"] == "in_progress"

            publish = client.post(
                "/sessions/rel-http/turns",
                json={"text": 'call publish_release_notes {"version": "2.5.0", "notes": "n"}'},
            ).json()["turn_id"]
            assert _until_ended(client, "rel-http", publish)["status"] == "awaiting_approval"
            assert not Path(env["RELEASE_ASSISTANT_LOG"]).exists()  # nothing before approval
            (pending,) = client.get("/approvals").json()["approvals"]
            decided = client.post(
                f"/sessions/rel-http/turns/{publish}/approvals/{pending['call_id']}",
                json={"decision": "approve"},
            )
            assert decided.status_code == 202, decided.text
            assert _until_ended(client, "rel-http", publish)["status"] == "completed"
            (result,) = _tool_results(client, "rel-http", publish)
            assert result["content"].startswith("published 2.5.0 to the internal changelog")
    finally:
        server.stop()
    assert server.tracebacks() == ""
