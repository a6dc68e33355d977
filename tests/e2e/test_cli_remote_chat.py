"""`turnkeep chat --url` as a user runs it: a subprocess talking to a real `python -m turnkeep.api`
server (the `server` fixture of test_api_server: free port, temp data dir, scripted model)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_api_server import server  # noqa: F401  (the real-server fixture)

CHAT_TIMEOUT_S = 90


def _command() -> list[str]:
    script = Path(sys.executable).with_name("turnkeep")
    return [str(script)] if script.exists() else [sys.executable, "-m", "turnkeep.cli"]


def _chat(url: str, stdin: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
    return subprocess.run(
        [*_command(), "chat", "--url", url, *extra],
        input=stdin,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHAT_TIMEOUT_S,
        check=False,
    )


def test_remote_chat_streams_tool_calls_and_the_reply_quoting_the_note_then_shows_notes(
    server: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    done = _chat(
        server,
        "remember we chose SQLite\nwhat do you remember?\n/notes\n/quit\n",
        tmp_path,
        "--user",
        "alice",
    )

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"at {server} (dev user alice)" in out
    assert "  -> tool call working_notes_update " in out
    assert "  <- working_notes_update [ok] working notes updated" in out
    assert "assistant> Noted.\n" in out
    assert "  -> tool call working_notes_get {}\n" in out
    assert "assistant> Here is what I remember:\nwe chose SQLite\n" in out
    assert out.count("Here is what I remember") == 1  # the settled reply is not printed twice
    assert out.count(": completed, 2 model rounds, ") == 2  # one status line per turn
    assert "you> we chose SQLite\n" in out  # /notes prints the stored notes
    assert not (tmp_path / ".local").exists()  # nothing ran in-process
    assert done.stderr == ""


def test_remote_chat_reuses_a_session_by_id_and_keeps_its_notes(
    server: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    first = _chat(server, "remember tea is good\n", tmp_path, "--session", "s-reuse")
    second = _chat(server, "/notes\n", tmp_path, "--session", "s-reuse")

    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert "turnkeep chat: session s-reuse at" in second.stdout
    assert "you> tea is good\n" in second.stdout


def test_remote_chat_against_a_stopped_server_says_it_cannot_reach_it_and_exits_non_zero(
    tmp_path: Path,
) -> None:
    with socket.socket() as sock:  # a port nothing listens on any more
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"

    done = _chat(url, "hello\n/quit\n", tmp_path)

    assert done.returncode == 1
    assert f"turnkeep chat: cannot reach the API at {url}" in done.stderr
    assert "Traceback" not in done.stderr
