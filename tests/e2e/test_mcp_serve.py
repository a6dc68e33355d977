"""`turnkeep serve --agent` with an agent that has an MCP server, driven by a real HTTP client:
the turn calls the agent's function tool and an MCP tool of a real server on 127.0.0.1, and
`GET /agent` lists the MCP tools with their source; with the server down the turn goes on with
the function tool and the events page, the event stream and `chat --url` say so."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.mcp_agent import REFERENCE, URL_ENV
from tests.support.mcp_servers import HttpMcpServer, free_port
from tests.support.real_server import RealServer, repo_pythonpath

ALICE = {"Authorization": "Bearer dev-alice"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, HttpMcpServer]]:
    with HttpMcpServer("kb") as kb:
        real = RealServer(
            tmp_path / "data",
            extra_env={URL_ENV: kb.url, "PYTHONPATH": repo_pythonpath()},
            command=[sys.executable, "-m", "turnkeep.cli", "serve", "--agent", REFERENCE],
        )
        url = real.start()
        try:
            yield url, kb
        finally:
            real.stop()


def _wait(client: httpx.Client, sid: str, turn: str, headers: dict[str, str] | None = None) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        view = client.get(f"/sessions/{sid}/turns/{turn}", headers=headers or ALICE).json()
        if view["finished"]:
            return str(view["status"])
        time.sleep(0.05)
    raise AssertionError("the turn did not end")


def test_serve_with_an_agent_runs_a_turn_that_calls_its_mcp_server(
    served: tuple[str, HttpMcpServer],
) -> None:
    url, kb = served
    with httpx.Client(base_url=url, timeout=30) as client:
        agent = client.get("/agent", headers=ALICE)
        assert agent.status_code == 200, agent.text
        sources = {t["name"]: t["source"] for t in agent.json()["tools"]}
        assert sources["kb_lookup"] == "mcp:kb"
        assert sources["kb_fail"] == "mcp:kb"
        assert sources["kb_slow"] == "mcp:kb"
        assert sources["shout"] == "function"
        sid = client.post("/sessions", json={}, headers=ALICE).json()["session_id"]
        started = client.post(
            f"/sessions/{sid}/turns",
            json={"text": 'call kb_lookup {"term": "rollback"}\ncall shout {"text": "ok"}'},
            headers=ALICE,
        )
        assert started.status_code == 202, started.text
        status = _wait(client, sid, started.json()["turn_id"])
        transcript = client.get(f"/sessions/{sid}/transcript", headers=ALICE).text
    assert status == "completed"
    assert "rollback: 2 entries" in transcript
    assert "OK" in transcript
    assert kb.methods["tools/call"] == 1
    # GET /agent listed once; the turn's steps reused the listing (one process, one cache).
    assert kb.methods["tools/list"] == 1


BOB = {"Authorization": "Bearer dev-bob"}


def test_a_slow_mcp_call_of_one_session_does_not_hold_up_another_sessions_turn(
    served: tuple[str, HttpMcpServer],
) -> None:
    url, kb = served
    with httpx.Client(base_url=url, timeout=30) as client:
        a_sid = client.post("/sessions", json={}, headers=ALICE).json()["session_id"]
        b_sid = client.post("/sessions", json={}, headers=BOB).json()["session_id"]
        slow = client.post(
            f"/sessions/{a_sid}/turns",
            json={"text": 'call kb_slow {"seconds": 8}'},
            headers=ALICE,
        ).json()["turn_id"]
        deadline = time.monotonic() + 20
        while kb.methods["tools/call"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)  # alice's call has reached the server and waits there
        fast = client.post(
            f"/sessions/{b_sid}/turns",
            json={"text": 'call kb_lookup {"term": "quick"}'},
            headers=BOB,
        ).json()["turn_id"]
        bob_status = _wait(client, b_sid, fast, BOB)
        alice_view = client.get(f"/sessions/{a_sid}/turns/{slow}", headers=ALICE).json()
        alice_status = _wait(client, a_sid, slow, ALICE)
    assert bob_status == "completed"
    assert not alice_view["finished"]  # bob's turn ended while alice's call was still running
    assert alice_status == "completed"


def test_serve_goes_on_without_a_server_that_is_down_and_every_event_reader_is_told(
    tmp_path: Path,
) -> None:
    real = RealServer(
        tmp_path / "data",
        extra_env={URL_ENV: f"http://127.0.0.1:{free_port()}/mcp", "PYTHONPATH": repo_pythonpath()},
        command=[sys.executable, "-m", "turnkeep.cli", "serve", "--agent", REFERENCE],
    )
    url = real.start()
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            sid = client.post("/sessions", json={}, headers=ALICE).json()["session_id"]
            turn = client.post(
                f"/sessions/{sid}/turns", json={"text": 'call shout {"text": "ok"}'}, headers=ALICE
            ).json()["turn_id"]
            with client.stream(
                "GET", f"/sessions/{sid}/turns/{turn}/stream", headers=ALICE
            ) as stream:
                sse = "".join(stream.iter_text())
            page = client.get(f"/sessions/{sid}/turns/{turn}/events", headers=ALICE).json()
        chat = subprocess.run(
            [sys.executable, "-m", "turnkeep.cli", "chat", "--url", url, "--user", "alice",
             "--session", sid],
            input='call shout {"text": "again"}\n/quit\n',
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        real.stop()

    assert page["status"] == "completed"
    (notice,) = [e for e in page["events"] if e["kind"] == "tool_source_unavailable"]
    assert notice["source"] == "kb"
    assert notice["tools"] == []
    assert notice["message"].startswith("tool source 'kb': cannot list its tools: ConnectError")
    assert "event: tool_source_unavailable\n" in sse
    assert '"status":"completed"' in sse
    assert chat.returncode == 0, chat.stderr
    assert "[without its tools: tool source 'kb': cannot list its tools: ConnectError" in (
        chat.stdout
    )
    assert "<- shout [ok] AGAIN" in chat.stdout
