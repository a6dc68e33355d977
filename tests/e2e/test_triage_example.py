"""The example triage agent (`turnkeep_agents.release_assistant.triage:agent`) as a user runs it:
under `turnkeep serve --agent` (GET /agent lists its two sub-agents and the output schemas; the
turn view has its `Triage` as `output`) and in `turnkeep chat --agent` (the result is printed
as JSON and the typed child's `Readiness` shows as the tool result) (docs/agent.md,
"Sub-agents")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.real_server import RealServer, repo_pythonpath
from tests.support.triage_scripts import AGENT, DECISION, VERDICT, both_sub_agents

ALICE = {"Authorization": "Bearer dev-alice"}


def _until_ended(client: httpx.Client, sid: str, turn: str) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        view: dict[str, Any] = client.get(f"/sessions/{sid}/turns/{turn}").json()
        if view.get("finished"):
            return view
        time.sleep(0.05)
    raise AssertionError("the turn did not end")


def test_turnkeep_serve_runs_the_triage_agent_with_both_sub_agents_and_a_typed_result(
    tmp_path: Path,
) -> None:
    from turnkeep_agents.release_assistant.readiness import Readiness
    from turnkeep_agents.release_assistant.triage import Triage

    server = RealServer(
        tmp_path / "local",
        command=[sys.executable, "-m", "turnkeep.cli", "serve", "--agent", AGENT],
    )
    url = server.start()
    try:
        with httpx.Client(base_url=url, headers=ALICE, timeout=30) as client:
            agent = client.get("/agent").json()
            client.post("/sessions", json={"session_id": "triage"}).raise_for_status()
            started = client.post("/sessions/triage/turns", json={"text": both_sub_agents()})
            assert started.status_code == 202, started.text
            turn = started.json()["turn_id"]
            view = _until_ended(client, "triage", turn)
            page = client.get(f"/sessions/triage/turns/{turn}/events", params={"limit": 100})
            events = [e for e in page.json()["events"] if e.get("role") == "tool"]
            results = {p["name"]: p for e in events for p in e["parts"]}
    finally:
        server.stop()

    assert agent["name"] == "release_triage"
    assert agent["output_schema"] == Triage.model_json_schema()
    subs = {s["name"]: s for s in agent["sub_agents"]}
    assert set(subs) == {"check_readiness", "write_changelog"}
    assert subs["check_readiness"]["agent"] == "release_readiness"
    assert subs["check_readiness"]["tools"] == ["lookup_ticket", "check_ci"]
    # A typed sub-agent says what shape its result has; a text one says it has none.
    assert subs["check_readiness"]["output_schema"] == Readiness.model_json_schema()
    assert subs["write_changelog"]["output_schema"] is None
    assert view["status"] == "completed", view
    assert view["output"] == DECISION
    assert json.loads(results["check_readiness"]["content"]) == VERDICT
    assert results["write_changelog"]["content"].startswith("Tool ticket_summary returned: ")
    # Each sub-agent's result event names its completed child turn.
    children = [e["subagent"] for e in events if e.get("subagent")]
    assert sorted(c["status"] for c in children) == ["completed", "completed"]
    assert view["subagent_usage"]["input_tokens"] > 0
    assert server.tracebacks() == ""


def _chat(args: list[str], cwd: Path, stdin: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
    clean["PYTHONPATH"] = repo_pythonpath()
    return subprocess.run(
        [sys.executable, "-m", "turnkeep.cli", "chat", *args],
        cwd=cwd,
        env=clean,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_turnkeep_chat_runs_the_triage_agent_and_prints_its_result_as_json(
    tmp_path: Path,
) -> None:
    # One message over several lines: each but the last ends with a backslash.
    message = " \\\n".join(both_sub_agents().splitlines())

    done = _chat(["--agent", AGENT, "--session", "triage"], tmp_path, f"{message}\n/quit\n")

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "turnkeep chat: session triage (agent release_triage, model scripted)" in out
    # The typed child's Readiness is the call's result, as JSON; the writer's is its text.
    assert f"<- check_readiness [ok] {json.dumps(VERDICT)}\n" in out
    assert "<- write_changelog [ok] Tool ticket_summary returned: REL-101: " in out
    assert "result> " + json.dumps(DECISION, indent=2) in out
    assert "completed, 2 model rounds" in out
