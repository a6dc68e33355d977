"""A real `python -m turnkeep.api` process on 127.0.0.1 that tests (and the reliability report)
can start, `kill -9` and start again over the same data directory."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from tools import processes

STARTUP_TIMEOUT_S = 60.0
ROOT = Path(__file__).resolve().parents[2]


def repo_pythonpath() -> str:
    """A PYTHONPATH with the repository first, for a server that imports `tests.support`."""
    return os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])


class RealServer:
    """One local API server over `data_dir` (SQLite, scripted model, dev tokens); `extra_env`
    adds settings (e.g. `TURNKEEP_APPROVAL_TIMEOUT_SECONDS`); `command` replaces
    `python -m turnkeep.api` (e.g. `turnkeep serve --agent ...`; `--port 0` is added)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        extra_env: dict[str, str] | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.extra_env = dict(extra_env or {})
        self.command = command or [sys.executable, "-m", "turnkeep.api"]
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.stderr: list[str] = []

    def start(self, port: int = 0) -> str:
        """Start the server (a free port unless `port` is given); returns its base URL."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
        env["TURNKEEP_LOCAL_DIR"] = str(self.data_dir)
        env.update(self.extra_env)
        process = subprocess.Popen(
            [*self.command, "--port", str(port), "--log-level", "warning"],
            cwd=self.data_dir.parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.process = process
        lines: queue.Queue[str] = queue.Queue()
        assert process.stdout is not None
        assert process.stderr is not None
        out, err = process.stdout, process.stderr

        def pump_out() -> None:
            for line in out:
                lines.put(line)

        def pump_err() -> None:
            for line in err:
                self.stderr.append(line)

        threading.Thread(target=pump_out, daemon=True).start()
        threading.Thread(target=pump_err, daemon=True).start()
        try:
            first = lines.get(timeout=STARTUP_TIMEOUT_S)
        except queue.Empty:
            self.kill9()
            raise RuntimeError("the server printed no address: " + "".join(self.stderr)) from None
        if not first.startswith("turnkeep api listening on http://127.0.0.1:"):
            raise RuntimeError(f"unexpected first line {first!r}")
        self.url = first.rsplit(" ", 1)[1].strip()
        return self.url

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def kill9(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        processes.kill9(self.process)

    def stop(self) -> None:
        """A graceful stop (SIGTERM), then SIGKILL if it hangs."""
        processes.stop(self.process, grace_s=20)

    def tracebacks(self) -> str:
        """The server's stderr when it printed a traceback ('' otherwise)."""
        text = "".join(self.stderr)
        return text if "Traceback" in text else ""


def raw_request(port: int, request: bytes, *, timeout: float = 10.0) -> int:
    """Send raw bytes to the server and return the HTTP status it answers (0: no answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        deadline = time.monotonic() + timeout
        while b"\r\n" not in data and time.monotonic() < deadline:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    first = data.split(b"\r\n", 1)[0].split()
    return int(first[1]) if len(first) >= 2 and first[1].isdigit() else 0


BODY = b'{"title": "x"}'
DUPLICATES = {
    "authorization-two-users": (
        b"GET /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer dev-alice\r\nAuthorization: Bearer dev-bob\r\n\r\n"
    ),
    "authorization-same-twice": (
        b"GET /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer dev-alice\r\nAuthorization: Bearer dev-alice\r\n\r\n"
    ),
    "content-length-conflicting": (
        b"POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer dev-alice\r\n"
        b"Content-Type: application/json\r\nContent-Length: 14\r\nContent-Length: 4\r\n\r\n" + BODY
    ),
    "host-twice": (
        b"GET /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n"
        b"Authorization: Bearer dev-alice\r\n\r\n"
    ),
    "host-twice-unauthenticated-trailing-slash": (
        b"DELETE /sessions/s-1/ HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n"
    ),
}

MALFORMED = {
    "garbage-request-line": b"HELLO THERE\r\n\r\n",
    "header-without-colon": b"GET /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nNoColonHere\r\n\r\n",
    "bad-chunk-size": (
        b"POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer dev-alice\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
    ),
    "chunked-and-content-length": (
        b"POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer dev-alice\r\n"
        b"Content-Type: application/json\r\nContent-Length: 14\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + BODY + b"\r\n"
    ),
    "no-host-http11": b"GET /sessions HTTP/1.1\r\nAuthorization: Bearer dev-alice\r\n\r\n",
    "oversize-header": (
        b"GET /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
    ),
}
"""Requests the HTTP parser itself must refuse (4xx) or drop (no answer), never a 5xx."""
