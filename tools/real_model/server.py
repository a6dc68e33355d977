"""Start and stop a prepared `llama-server` on 127.0.0.1 by its pid (tests and the benchmark).

`LlamaServer(binary, model).start()` picks a free port (or reuses the one it had, so a restart
keeps the URL turnkeep was given), waits for `GET /health` to answer 200 and returns the base
URL; `kill9()` is a crash, `stop()` a graceful stop. The server's output goes to a log file
(`log_path`) that the tests read when a check fails.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx

from tools import processes

STARTUP_TIMEOUT_S = 120.0
MODEL_ALIAS = "smollm2"
"""The name the server reports as its model (`--alias`); turnkeep's spec names the same."""


def free_port() -> int:
    """A port nothing listens on right now (127.0.0.1)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LlamaServer:
    """One `llama-server` process serving `model` with a `ctx_size` window, one thread."""

    def __init__(
        self,
        binary: Path,
        model: Path,
        *,
        log_path: Path,
        ctx_size: int = 4096,
        threads: int = 1,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.binary = binary
        self.model = model
        self.log_path = log_path
        self.ctx_size = ctx_size
        self.threads = threads
        self.extra_args = extra_args
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """The server's base URL (no `/v1`)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def spec(self) -> str:
        """The turnkeep model spec for this server (its window given as `context=`)."""
        return f"openai:{self.url}/v1#{MODEL_ALIAS}?context={self.ctx_size}"

    def start(self) -> str:
        """Start (on the previous port after a stop) and wait until it is healthy."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("llama-server is already running")
        self.port = self.port or free_port()
        command = [
            str(self.binary),
            *("-m", str(self.model), "--alias", MODEL_ALIAS, "--jinja"),
            *("--host", "127.0.0.1", "--port", str(self.port)),
            *("-c", str(self.ctx_size), "-t", str(self.threads), "-np", "1"),
            *self.extra_args,
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"llama-server exited with status {self.process.returncode}: {self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return self.url
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.kill9()
        raise RuntimeError(f"llama-server not healthy in {STARTUP_TIMEOUT_S:.0f} s")

    def kill9(self) -> None:
        """SIGKILL, as in a crash."""
        processes.kill9(self.process)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit within 10 s."""
        processes.stop(self.process, grace_s=10)

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the server's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
