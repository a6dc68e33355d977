"""The local experience as a user meets it: `turnkeep serve`, `chat` (in-process and `--url`),
`sessions`, with a slowed scripted model (`scripted?delay_ms=N`) so turns can be interrupted."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

TIMEOUT_S = 60.0
SLOW_MODEL = "scripted?delay_ms=250&words_per_frame=1"
LONG_LINE = "please repeat " + " ".join(f"word{i}" for i in range(40))


def _command() -> list[str]:
    script = Path(sys.executable).with_name("turnkeep")
    return [str(script)] if script.exists() else [sys.executable, "-m", "turnkeep.cli"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
    env["TURNKEEP_LOCAL_DIR"] = str(tmp_path / "data")
    env.update(extra)
    return env


class Running:
    """A `turnkeep` subprocess whose stdout is read as it comes."""

    def __init__(self, args: list[str], tmp_path: Path, **env: str) -> None:
        self.process = subprocess.Popen(
            [*_command(), *args],
            cwd=tmp_path,
            env=_env(tmp_path, **env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.seen = ""
        self._chunks: queue.Queue[str] = queue.Queue()
        stdout = self.process.stdout
        assert stdout is not None

        def pump() -> None:
            while piece := stdout.read(1):
                self._chunks.put(piece)

        threading.Thread(target=pump, daemon=True).start()

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + TIMEOUT_S
        while text not in self.seen:
            try:
                self.seen += self._chunks.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"never printed {text!r}; printed:\n{self.seen}")
        return self.seen

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def _run(args: list[str], tmp_path: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_command(), *args],
        input=stdin,
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S * 2,
        check=False,
    )


@pytest.fixture
def slow_server(tmp_path: Path) -> Iterator[str]:
    server = Running(
        ["serve", "--port", "0", "--model", SLOW_MODEL, "--log-level", "warning"], tmp_path
    )
    try:
        first = server.wait_for("\n").splitlines()[0]
        assert first.startswith("turnkeep api listening on http://127.0.0.1:"), first
        yield first.rsplit(" ", 1)[1]
    finally:
        server.stop()


@pytest.mark.slow
def test_a_killed_chat_leaves_no_stuck_session_the_next_chat_ends_its_turn_and_goes_on(
    tmp_path: Path,
) -> None:
    chat = Running(["chat", "--session", "s-killed"], tmp_path, TURNKEEP_MODEL=SLOW_MODEL)
    try:
        chat.wait_for("you> ")
        chat.send(LONG_LINE)
        chat.wait_for("assistant> ")
        chat.process.kill()  # SIGKILL: nothing of the process runs any more
        chat.process.wait(timeout=10)
    finally:
        chat.stop()

    shown = _run(["sessions", "show", "s-killed"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"left by pid {chat.process.pid} on" in shown.stdout
    again = _run(["chat", "--session", "s-killed"], tmp_path, "remember the sky is blue\n/quit\n")

    assert again.returncode == 0, again.stderr
    assert f"was left running by pid {chat.process.pid} on" in again.stdout
    assert "ended it: failed" in again.stdout
    assert "already has a turn in progress" not in again.stdout
    assert "assistant> Noted." in again.stdout  # the new turn ran to its end
    listed = _run(["sessions", "list"], tmp_path)
    assert "s-killed  user=demo-user" in listed.stdout
    assert "turn=completed" in listed.stdout


@pytest.mark.slow
def test_a_terminated_chat_ends_its_running_turn_as_aborted(tmp_path: Path) -> None:
    chat = Running(["chat", "--session", "s-term"], tmp_path, TURNKEEP_MODEL=SLOW_MODEL)
    try:
        chat.wait_for("you> ")
        chat.send(LONG_LINE)
        chat.wait_for("assistant> ")
        chat.process.send_signal(signal.SIGTERM)
        assert chat.process.wait(timeout=30) == 130
    finally:
        chat.stop()

    shown = _run(["sessions", "show", "s-term"], tmp_path)
    assert "turn     op-" in shown.stdout
    assert ": aborted" in shown.stdout


@pytest.mark.slow
def test_ctrl_c_in_a_url_chat_cancels_the_server_side_turn_and_the_chat_goes_on(
    slow_server: str, tmp_path: Path
) -> None:
    chat = Running(["chat", "--url", slow_server, "--session", "s-ctrl-c"], tmp_path)
    try:
        chat.wait_for("you> ")
        chat.send(LONG_LINE)
        chat.wait_for("assistant> ")
        chat.process.send_signal(signal.SIGINT)
        assert "[interrupted: cancel of turn op-" in chat.wait_for("requested")
        chat.send("/quit")
        assert chat.process.wait(timeout=30) == 0
    finally:
        chat.stop()
    with httpx.Client(base_url=slow_server, headers={"Authorization": "Bearer dev-demo-user"}) as c:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            turn = c.get("/sessions/s-ctrl-c").json()["turn"]
            if turn["status"] != "cancelling" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert turn["status"] == "aborted"


@pytest.mark.slow
def test_a_url_pointing_below_the_api_gets_a_hint_naming_the_right_one(
    slow_server: str, tmp_path: Path
) -> None:
    done = _run(["chat", "--url", f"{slow_server}/api"], tmp_path, "/quit\n")

    assert done.returncode == 1
    assert f"looks wrong: the turnkeep API answers at {slow_server}" in done.stderr
