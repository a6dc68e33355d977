"""A real OpenAI-compatible Chat Completions server on 127.0.0.1 for tests (stdlib http.server).

Each POST to `/v1/chat/completions` is answered by the next queued `Reply` (or by a `responder`
callable that computes one from the request body); every request body and its headers are
recorded. Streamed replies use HTTP/1.1 chunked transfer encoding, one SSE event per chunk, as
uvicorn/vLLM/OpenAI do, so a dropped connection is a real truncated chunked body.

Like Ollama and vLLM (which parse `tool_calls[].function.arguments` into an object for the chat
template), the server rejects a request whose assistant tool-call arguments are not the JSON text
of an object.
"""

from __future__ import annotations

import base64
import json
import socket
import socketserver
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from turnkeep.providers.base import (
    AttachmentPart,
    Message,
    ModelRequest,
    Part,
    ResponseDone,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolCallStart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from turnkeep.providers.openai_compat import TOOL_ERROR_PREFIX


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN (a DNS lookup); 127.0.0.1 needs none.
        socketserver.TCPServer.server_bind(self)
        self.server_name = "127.0.0.1"
        self.server_port = self.server_address[1]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client closing its keep-alive connection is normal here, not worth a traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@dataclass
class Reply:
    """How the server answers one request.

    `events`: SSE data payloads (dicts are JSON-encoded; strings sent verbatim, e.g. "[DONE]").
    `status`/`json_body`: a plain JSON response instead (errors, non-streamed completions).
    `drop_after`: close the socket after this many events, without ending the chunked body.
    `hang`: block until the server stops (for client timeouts).
    `pace_seconds`: wait this long before each event (a slow model, for abandoned streams).
    """

    events: list[dict[str, Any] | str] = field(default_factory=list)
    status: int = 200
    json_body: Any = None
    drop_after: int | None = None
    hang: bool = False
    pace_seconds: float = 0.0


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class ChatServer:
    """Context manager running the server in a thread; `base_url` ends in `/v1`."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.replies: list[Reply] = []
        self.requests: list[RecordedRequest] = []
        self.responder = responder
        self.client_gone = threading.Event()
        """Set when a client closed its connection before a streamed reply was all written."""
        self._release = threading.Event()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self.responder is not None:
            return self.responder(body)
        if not self.replies:
            return Reply(status=500, json_body={"error": {"message": "test server: no reply"}})
        return self.replies.pop(0)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(
                    RecordedRequest(
                        self.path, {k.lower(): v for k, v in self.headers.items()}, body
                    )
                )
                if self.path != "/v1/chat/completions":
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                bad = _bad_tool_arguments(body)
                if bad is not None:
                    self._json(400, {"error": {"message": f"invalid tool call arguments: {bad}"}})
                    return
                reply = server._next_reply(body)
                if reply.hang:
                    server._release.wait(timeout=30)
                    self.close_connection = True
                    return
                if reply.json_body is not None or reply.status != 200:
                    self._json(reply.status, reply.json_body)
                    return
                self._stream(reply)

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for count, event in enumerate(reply.events):
                    if reply.drop_after is not None and count >= reply.drop_after:
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    if reply.pace_seconds and server._release.wait(reply.pace_seconds):
                        return
                    payload = event if isinstance(event, str) else json.dumps(event)
                    data = f"data: {payload}\n\n".encode()
                    try:
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        server.client_gone.set()
                        self.close_connection = True
                        return
                self.wfile.write(b"0\r\n\r\n")

        return Handler


def _bad_tool_arguments(body: dict[str, Any]) -> str | None:
    """The first assistant tool-call `arguments` text that is not a JSON object, if any."""
    for message in body.get("messages") or ():
        for call in message.get("tool_calls") or ():
            arguments = call.get("function", {}).get("arguments")
            try:
                parsed = json.loads(arguments) if isinstance(arguments, str) else None
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                return repr(arguments)
    return None


# -- chunk builders -------------------------------------------------------------------------------


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    """One `chat.completion.chunk` with a single choice."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def usage_chunk(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    """The final chunk sent with `stream_options.include_usage`: no choices, only usage."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [],
        "usage": usage,
    }


def text_chunks(*pieces: str) -> Iterator[dict[str, Any]]:
    yield chunk({"role": "assistant", "content": ""})
    for piece in pieces:
        yield chunk({"content": piece})


def tool_call_chunks(
    index: int, call_id: str, name: str, pieces: list[str]
) -> list[dict[str, Any]]:
    """A streamed tool call: id and name first, then the argument text in pieces."""
    first = {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": ""},
    }
    return [
        chunk({"tool_calls": [first]}),
        *(chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for p in pieces),
    ]


# -- neutral <-> wire ----------------------------------------------------------------------------


def neutral_request(body: dict[str, Any]) -> ModelRequest:
    """Map a Chat Completions request back to the neutral request (the server's view)."""
    system = ""
    messages: list[Message] = []
    names: dict[str, str] = {}
    for raw in body["messages"]:
        role = raw["role"]
        if role == "system":
            system = raw["content"]
        elif role == "user":
            messages.append(Message("user", _user_parts(raw["content"])))
        elif role == "assistant":
            parts: list[Part] = [TextPart(raw["content"])] if raw.get("content") else []
            for call in raw.get("tool_calls") or []:
                names[call["id"]] = call["function"]["name"]
                parts.append(
                    ToolCallPart(
                        call["id"], call["function"]["name"], call["function"]["arguments"]
                    )
                )
            messages.append(Message("assistant", tuple(parts)))
        else:
            content: str = raw["content"]
            is_error = content.startswith(TOOL_ERROR_PREFIX)
            result = ToolResultPart(
                raw["tool_call_id"],
                names[raw["tool_call_id"]],
                content.removeprefix(TOOL_ERROR_PREFIX),
                is_error,
            )
            if messages and messages[-1].role == "tool":
                messages[-1] = Message("tool", (*messages[-1].parts, result))
            else:
                messages.append(Message("tool", (result,)))
    tools = tuple(
        ToolSpec(t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
        for t in body.get("tools") or []
    )
    return ModelRequest(system, tuple(messages), tools)


def _user_parts(content: str | list[dict[str, Any]]) -> tuple[Part, ...]:
    """A user message's content: text, or content parts (`image_url` and `file` data URLs as
    the attachments they carry; any other URL is refused: turnkeep never sends one)."""
    if isinstance(content, str):
        return (TextPart(content),)
    parts: list[Part] = []
    for item in content:
        if item["type"] == "text":
            parts.append(TextPart(item["text"]))
            continue
        url = item["image_url"]["url"] if item["type"] == "image_url" else item["file"]["file_data"]
        header, _, data = url.partition(",")
        if not header.startswith("data:") or not header.endswith(";base64"):
            raise ValueError(f"not a base64 data URL: {url[:40]!r}")
        raw = base64.b64decode(data)
        name = item.get("file", {}).get("filename", "image")
        parts.append(AttachmentPart("wire-" + item["type"], name, header[5:-7], len(raw), raw))
    return tuple(parts)


def sse_reply(
    events: list[StreamEvent], usage: Usage | None = None, *, with_usage: bool = True
) -> Reply:
    """The scripted stream as Chat Completions chunks, arguments split into small deltas.

    `usage` replaces the scripted usage (which counts the characters of the request as received:
    tool-call arguments that are not a JSON object arrive as `{}`, so the count differs);
    `with_usage=False` sends no usage chunk (llama-cpp-python ignores `stream_options`).
    """
    out: list[dict[str, Any] | str] = [chunk({"role": "assistant", "content": ""})]
    for event in events:
        if isinstance(event, TextDelta):
            out.append(chunk({"content": event.text}))
        elif isinstance(event, ToolCallStart):
            call = {
                "index": event.index,
                "id": event.id,
                "type": "function",
                "function": {"name": event.name, "arguments": ""},
            }
            out.append(chunk({"tool_calls": [call]}))
        elif isinstance(event, ToolCallDelta):
            out += [
                chunk({"tool_calls": [{"index": event.index, "function": {"arguments": p}}]})
                for p in _pieces(event.arguments, 4)
            ]
        elif isinstance(event, ResponseDone):
            reason = {"tool_use": "tool_calls", "end_turn": "stop"}[event.response.stop_reason]
            out.append(chunk({}, reason))
            tokens = usage or event.response.usage
            if with_usage:
                out.append(usage_chunk(tokens.input_tokens, tokens.output_tokens))
    out.append("[DONE]")
    return Reply(out)


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]
