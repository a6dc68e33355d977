"""The Step Functions endpoint of the SAM local functions: forwards every call to the moto
container and keeps the task-token callbacks for the host's executor.

Why: the executions run in the host's interpreter (executor.py), which the containers cannot
reach, so a function's `SendTaskSuccess` (an approval decided, a sub-agent's child turn ended:
docs/step-functions.md) would land in the moto container, whose executions are only launch
records, and the waiting execution would never hear it. The functions' `AWS_ENDPOINT_URL_SFN`
names this relay instead; `GET /relay/callbacks?after=N` hands the host the callbacks from the
N-th on, and the executor delivers each to the execution holding the token.

Standard library only: it runs as `python3 sfn_relay.py` in the Lambda runtime image.
"""

from __future__ import annotations

import argparse
import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

CALLBACK_TARGETS = frozenset({
    "AWSStepFunctions.SendTaskSuccess",
    "AWSStepFunctions.SendTaskFailure",
    "AWSStepFunctions.SendTaskHeartbeat",
})  # fmt: skip
"""The X-Amz-Target of the calls that answer a task token."""
CALLBACKS_PATH = "/relay/callbacks"
HOP_HEADERS = frozenset({"host", "content-length", "connection", "transfer-encoding"})


class CallbackLog:
    """The callbacks seen so far, in arrival order (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[dict[str, Any]] = []

    def add(self, target: str, body: bytes) -> None:
        """Keep one callback: its operation name and its JSON request."""
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = {}
        with self._lock:
            self._items.append({"operation": target.rsplit(".", 1)[-1], "request": request})

    def since(self, after: int) -> list[dict[str, Any]]:
        """The callbacks from index `after` on."""
        with self._lock:
            return list(self._items[max(after, 0) :])


def make_handler(upstream: str, callbacks: CallbackLog) -> type[BaseHTTPRequestHandler]:
    """A request handler forwarding to `upstream` and recording callbacks in `callbacks`."""

    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if parts.path != CALLBACKS_PATH:
                self._forward(b"")
                return
            after = int(parse_qs(parts.query).get("after", ["0"])[0])
            self._answer(200, {"Content-Type": "application/json"},
                         json.dumps({"callbacks": callbacks.since(after)}).encode())  # fmt: skip

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            target = self.headers.get("X-Amz-Target", "")
            if target in CALLBACK_TARGETS:
                callbacks.add(target, body)
            self._forward(body)

        def _forward(self, body: bytes) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            request = urllib.request.Request(
                upstream + self.path, data=body or None, headers=headers, method=self.command
            )
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    self._answer(answer.status, dict(answer.headers), answer.read())
            except urllib.error.HTTPError as error:
                self._answer(error.code, dict(error.headers), error.read())

        def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for name, text in headers.items():
                if name.lower() not in HOP_HEADERS:
                    self.send_header(name, text)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # one line per request would drown the container's log

    return Relay


def serve(host: str, port: int, upstream: str) -> ThreadingHTTPServer:
    """A started relay server (its own thread); `shutdown()` stops it."""
    server = ThreadingHTTPServer((host, port), make_handler(upstream.rstrip("/"), CallbackLog()))
    threading.Thread(target=server.serve_forever, name="sfn-relay", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    """`python3 sfn_relay.py --port P --upstream URL`: serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer(
        (args.host, args.port), make_handler(args.upstream.rstrip("/"), CallbackLog())
    )
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
