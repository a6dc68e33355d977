"""A recording pass-through in front of `llama-server`: what turnkeep sent, what the server said.

Every `POST /v1/chat/completions` body is recorded with the raw SSE text the server answered;
the answer is relayed chunk by chunk as it arrives (the stream stays a stream). When the server
dies mid-answer the relay drops the client's connection without ending the chunked body, as a
direct connection to a killed server would end.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


@dataclass
class Exchange:
    """One chat completion: the request body and the server's answer (status, SSE text)."""

    body: dict[str, Any]
    status: int = 0
    answer: str = ""

    def chunks(self) -> list[dict[str, Any]]:
        """The answer's `data:` JSON chunks (the `[DONE]` marker left out)."""
        out = []
        for line in self.answer.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                out.append(json.loads(line[len("data: ") :]))
        return out

    def usage(self) -> dict[str, Any]:
        """The `usage` object of the server's final chunk."""
        found = [c["usage"] for c in self.chunks() if isinstance(c.get("usage"), dict)]
        assert found, f"the server sent no usage: {self.answer[-500:]!r}"
        return found[-1]

    def text_deltas(self) -> list[str]:
        """Every non-empty `content` delta the server streamed."""
        return [
            choice["delta"]["content"]
            for c in self.chunks()
            for choice in c.get("choices") or ()
            if (choice.get("delta") or {}).get("content")
        ]


@dataclass
class RecordingProxy:
    """Listens on 127.0.0.1 (a free port) and relays to `upstream` (a base URL, no `/v1`)."""

    upstream: str
    exchanges: list[Exchange] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL to give turnkeep instead of the server's (no `/v1`)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                exchange = Exchange(json.loads(raw or b"{}"))
                proxy.exchanges.append(exchange)
                headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
                try:
                    with httpx.stream(
                        "POST",
                        proxy.upstream + self.path,
                        content=raw,
                        headers=headers,
                        timeout=120,
                    ) as answer:
                        exchange.status = answer.status_code
                        self.send_response(answer.status_code)
                        kind = answer.headers.get("content-type", "application/json")
                        self.send_header("Content-Type", kind)
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        for piece in answer.iter_raw():
                            exchange.answer += piece.decode(errors="replace")
                            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                            self.wfile.flush()
                except httpx.HTTPError:
                    # The server died: cut the client off as it would have been.
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                self.wfile.write(b"0\r\n\r\n")

        return Handler
