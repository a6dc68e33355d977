"""BedrockProvider with a real botocore client against a local server speaking the wire protocol.

The unit tests use Stubber, which never runs botocore's HTTP layer or event-stream parser. Here a
`bedrock-runtime` client is pointed (`endpoint_url`) at a ThreadingHTTPServer on 127.0.0.1 that
answers ConverseStream with AWS event-stream binary frames (prelude, string headers, JSON
payload, CRC32s) in a chunked HTTP/1.1 body — so botocore parses real frames, raises in-stream
exceptions the way it really does, and a dropped connection surfaces as the urllib3 error it
really is.
"""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

import boto3
import pytest
from botocore.config import Config

from turnkeep.providers.base import (
    FatalModelError,
    Message,
    ModelRequest,
    ResponseDone,
    RetryableModelError,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallPart,
    ToolSpec,
    Usage,
)
from turnkeep.providers.bedrock import BedrockProvider

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
TOOL = ToolSpec("lookup", "Look something up.", {"type": "object", "properties": {}})


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude + CRC, string headers, payload, message CRC."""
    encoded = b"".join(
        struct.pack("!B", len(name))
        + name.encode()
        + b"\x07"  # header value type 7: string
        + struct.pack("!H", len(value))
        + value.encode()
        for name, value in headers.items()
    )
    prelude = struct.pack("!II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    message = prelude + struct.pack("!I", zlib.crc32(prelude)) + encoded + payload
    return message + struct.pack("!I", zlib.crc32(message))


def event(name: str, body: dict[str, Any]) -> bytes:
    headers = {":message-type": "event", ":event-type": name, ":content-type": "application/json"}
    return frame(headers, json.dumps(body).encode())


def exception_event(name: str, message: str) -> bytes:
    headers = {
        ":message-type": "exception",
        ":exception-type": name,
        ":content-type": "application/json",
    }
    return frame(headers, json.dumps({"message": message}).encode())


@dataclass
class Answer:
    """One response: event frames (optionally cut after `drop_after`), or an HTTP error."""

    frames: list[bytes] = field(default_factory=list)
    drop_after: int | None = None
    status: int = 200
    error_type: str = ""
    error_message: str = ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # skip HTTPServer's FQDN lookup
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]


class BedrockWire:
    """The local server; `answers` are consumed one per request, `paths` records requests."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.paths: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        wire = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                wire.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                wire.paths.append(self.path)
                answer = wire.answers.pop(0)
                if answer.status != 200:
                    body = json.dumps({"message": answer.error_message}).encode()
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("x-amzn-ErrorType", answer.error_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.amazon.eventstream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for count, data in enumerate(answer.frames):
                    if answer.drop_after is not None and count >= answer.drop_after:
                        # Half a frame, then the connection dies.
                        self.wfile.write(b"%x\r\n" % len(data) + data[: len(data) // 2])
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> BedrockWire:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def wire() -> Iterator[BedrockWire]:
    with BedrockWire() as running:
        yield running


@pytest.fixture
def provider(wire: BedrockWire) -> BedrockProvider:
    client = boto3.client(
        "bedrock-runtime",
        endpoint_url=wire.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )
    return BedrockProvider(MODEL, client)


def request() -> ModelRequest:
    return ModelRequest("sys", (Message("user", (TextPart("hi"),)),), (TOOL,))


def opening() -> list[bytes]:
    return [
        event("messageStart", {"role": "assistant"}),
        event("contentBlockDelta", {"delta": {"text": "Let me "}, "contentBlockIndex": 0}),
        event("contentBlockDelta", {"delta": {"text": "look."}, "contentBlockIndex": 0}),
        event("contentBlockStop", {"contentBlockIndex": 0}),
    ]


def test_real_event_stream_frames_are_parsed_into_text_and_a_reassembled_tool_call(
    wire: BedrockWire, provider: BedrockProvider
) -> None:
    arguments = '{"topic": "event streams", "depth": 2}'
    start = {"toolUse": {"toolUseId": "tooluse_1", "name": "lookup"}}
    wire.answers.append(
        Answer(
            [
                *opening(),
                event("contentBlockStart", {"start": start, "contentBlockIndex": 1}),
                *(
                    event(
                        "contentBlockDelta",
                        {
                            "delta": {"toolUse": {"input": arguments[i : i + 4]}},
                            "contentBlockIndex": 1,
                        },
                    )
                    for i in range(0, len(arguments), 4)
                ),
                event("contentBlockStop", {"contentBlockIndex": 1}),
                event("messageStop", {"stopReason": "tool_use"}),
                event(
                    "metadata",
                    {
                        "usage": {
                            "inputTokens": 30,
                            "outputTokens": 12,
                            "totalTokens": 42,
                            "cacheReadInputTokens": 100,
                        },
                        "metrics": {"latencyMs": 5},
                    },
                ),
            ]
        )
    )

    out = list(provider.stream(request()))

    assert wire.paths == [f"/model/{quote(MODEL, safe='')}/converse-stream"]
    assert wire.bodies[0]["toolConfig"]["tools"][0]["toolSpec"]["name"] == "lookup"
    assert out[:2] == [TextDelta("Let me "), TextDelta("look.")]
    done = out[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.message == Message(
        "assistant", (TextPart("Let me look."), ToolCallPart("tooluse_1", "lookup", arguments))
    )
    assert done.response.stop_reason == "tool_use"
    assert done.response.usage == Usage(30, 12, cache_read_tokens=100)


def test_connection_dropped_mid_frame_is_retryable(
    wire: BedrockWire, provider: BedrockProvider
) -> None:
    wire.answers.append(Answer(opening(), drop_after=2))

    received: list[StreamEvent] = []
    with pytest.raises(RetryableModelError) as caught:
        received.extend(provider.stream(request()))

    assert caught.value.code == "connection"
    assert received == [TextDelta("Let me ")]


@pytest.mark.parametrize(
    ("name", "kind"),
    [("throttlingException", "throttled"), ("modelStreamErrorException", "stream_error")],
)
def test_exception_frame_inside_the_stream_is_retryable(
    wire: BedrockWire, provider: BedrockProvider, name: str, kind: str
) -> None:
    wire.answers.append(Answer([*opening()[:2], exception_event(name, "try again soon")]))

    with pytest.raises(RetryableModelError, match="try again soon") as caught:
        list(provider.stream(request()))

    assert caught.value.code == kind


def test_http_429_throttling_is_retryable_and_not_retried_by_the_sdk(
    wire: BedrockWire, provider: BedrockProvider
) -> None:
    wire.answers.append(
        Answer(status=429, error_type="ThrottlingException", error_message="Too many requests")
    )

    with pytest.raises(RetryableModelError, match="Too many requests") as caught:
        list(provider.stream(request()))

    assert caught.value.code == "throttled"
    assert len(wire.paths) == 1


def test_http_400_input_too_long_is_a_fatal_context_length_error(
    wire: BedrockWire, provider: BedrockProvider
) -> None:
    wire.answers.append(
        Answer(
            status=400,
            error_type="ValidationException",
            error_message="Input is too long for requested model.",
        )
    )

    with pytest.raises(FatalModelError, match="Input is too long") as caught:
        list(provider.stream(request()))

    assert caught.value.code == "context_length"
