"""An approval inside a sub-agent's child turn, as a user meets it: `turnkeep serve --agent`
(a real server on 127.0.0.1) lists the child's request under the parent's turn and runs it once
approved through the parent's route; `turnkeep chat --agent` asks about it in-process and with
`--url` against that server (docs/approvals.md, "Inside a sub-agent")."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.approving_subagent import TASK_TEXT
from tests.support.real_server import RealServer, repo_pythonpath

AGENT = "tests.support.approving_subagent:agent"
ALICE = {"Authorization": "Bearer dev-alice"}

pytestmark = pytest.mark.slow


def _until(client: httpx.Client, sid: str, turn: str, wanted: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        view: dict[str, Any] = client.get(f"/sessions/{sid}/turns/{turn}").json()
        if view["status"] in wanted:
            return view
        time.sleep(0.05)
    raise AssertionError(f"turn {turn} never reached {wanted}")


def _serve(tmp_path: Path, **env: str) -> RealServer:
    return RealServer(
        tmp_path / "local",
        command=[sys.executable, "-m", "turnkeep.cli", "serve", "--agent", AGENT],
        extra_env={
            "SUBAGENT_MAIL_LOG": str(tmp_path / "mail.log"),
            "PYTHONPATH": repo_pythonpath(),
            **env,
        },
    )


def test_serve_lists_a_childs_request_under_the_parent_and_runs_it_once_approved(
    tmp_path: Path,
) -> None:
    server = _serve(tmp_path)
    url = server.start()
    try:
        with httpx.Client(base_url=url, headers=ALICE, timeout=30) as client:
            client.post("/sessions", json={"session_id": "mail-1"}).raise_for_status()
            turn = client.post("/sessions/mail-1/turns", json={"text": TASK_TEXT}).json()["turn_id"]
            _until(client, "mail-1", turn, {"awaiting_approval"})
            (pending,) = client.get("/approvals").json()["approvals"]
            assert (pending["session_id"], pending["turn_id"]) == ("mail-1", turn)
            assert pending["tool"] == "send_mail"
            assert pending["subagent"]["path"] == ["mailer"]
            assert not (tmp_path / "mail.log").exists()
            listed = client.get("/sessions").json()["sessions"]
            assert [s["session_id"] for s in listed] == ["mail-1"]

            decided = client.post(
                f"/sessions/mail-1/turns/{turn}/approvals/{pending['call_id']}",
                json={"decision": "approve"},
            )
            assert decided.status_code == 202, decided.text
            view = _until(client, "mail-1", turn, {"completed", "failed", "aborted"})
            assert view["status"] == "completed"
            assert (tmp_path / "mail.log").read_text() == "ops@example.com\n"
            child = client.get(f"/sessions/{pending['subagent']['session_id']}").json()
            assert child["turn"]["status"] == "completed"
            assert child["parent_session_id"] == "mail-1"
            assert client.get("/approvals").json()["approvals"] == []
    finally:
        server.stop()
    assert "Traceback" not in server.tracebacks()


def test_chat_asks_about_the_sub_agents_call_and_runs_it_once_approved(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
    env["TURNKEEP_LOCAL_DIR"] = str(tmp_path / "local")
    env["SUBAGENT_MAIL_LOG"] = str(tmp_path / "mail.log")
    env["PYTHONPATH"] = repo_pythonpath()
    done = subprocess.run(
        [sys.executable, "-m", "turnkeep.cli", "chat", "--agent", AGENT, "--session", "m-1"],
        input=f"{TASK_TEXT}\ny\n/quit\n",
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "?? approval needed: tool call send_mail [sub-agent mailer]" in out
    assert "approve? [y]es / [n]o / [e]dit: " in out
    assert "sent to ops@example.com" in out
    assert ": completed" in out
    assert (tmp_path / "mail.log").read_text() == "ops@example.com\n"


def test_chat_with_url_asks_about_the_childs_request_through_the_parents_routes(
    tmp_path: Path,
) -> None:
    server = _serve(tmp_path)
    url = server.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
        done = subprocess.run(
            [sys.executable, "-m", "turnkeep.cli", "chat", "--url", url, "--user", "alice"],
            input=f"{TASK_TEXT}\ny\n/quit\n",
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        server.stop()

    assert done.returncode == 0, done.stderr
    assert "?? approval needed: tool call send_mail" in done.stdout
    assert (tmp_path / "mail.log").read_text() == "ops@example.com\n"


def test_serve_times_a_childs_unanswered_request_out_and_the_parent_completes(
    tmp_path: Path,
) -> None:
    server = _serve(tmp_path, TURNKEEP_APPROVAL_TIMEOUT_SECONDS="2")
    url = server.start()
    try:
        with httpx.Client(base_url=url, headers=ALICE, timeout=30) as client:
            client.post("/sessions", json={"session_id": "mail-2"}).raise_for_status()
            turn = client.post("/sessions/mail-2/turns", json={"text": TASK_TEXT}).json()["turn_id"]
            _until(client, "mail-2", turn, {"awaiting_approval"})
            view = _until(client, "mail-2", turn, {"completed", "failed", "aborted"})
            page = client.get(f"/sessions/mail-2/turns/{turn}/events").json()
    finally:
        server.stop()

    assert view["status"] == "completed"
    results = [p for e in page["events"] if e.get("role") == "tool" for p in e["parts"]]
    assert "(timed out). It did not run." in results[0]["content"]
    assert not (tmp_path / "mail.log").exists()


def test_a_restart_while_a_childs_request_waits_keeps_it_and_approving_it_completes_both(
    tmp_path: Path,
) -> None:
    server = _serve(tmp_path)
    server.start()
    try:
        with httpx.Client(base_url=server.url, headers=ALICE, timeout=30) as client:
            client.post("/sessions", json={"session_id": "mail-3"}).raise_for_status()
            turn = client.post("/sessions/mail-3/turns", json={"text": TASK_TEXT}).json()["turn_id"]
            _until(client, "mail-3", turn, {"awaiting_approval"})
        server.kill9()
        server.start()
        with httpx.Client(base_url=server.url, headers=ALICE, timeout=30) as client:
            (pending,) = client.get("/approvals").json()["approvals"]
            assert pending["subagent"]["path"] == ["mailer"]
            decided = client.post(
                f"/sessions/mail-3/turns/{turn}/approvals/{pending['call_id']}",
                json={"decision": "approve"},
            )
            assert decided.status_code == 202, decided.text
            view = _until(client, "mail-3", turn, {"completed", "failed", "aborted"})
            child = client.get(f"/sessions/{pending['subagent']['session_id']}").json()
    finally:
        server.stop()

    assert view["status"] == "completed"
    assert child["turn"]["status"] == "completed"
    assert (tmp_path / "mail.log").read_text() == "ops@example.com\n"
    assert "Traceback" not in server.tracebacks()
