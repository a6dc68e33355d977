"""A local `bedrock-runtime` endpoint on 127.0.0.1 speaking the real wire protocol, for tests.

ConverseStream is answered with AWS event-stream binary frames (prelude, string headers, JSON
payload, CRC32s) in a chunked HTTP/1.1 body, so botocore's own parser decodes them; Converse with
JSON; errors as the service sends them (status, `x-amzn-ErrorType`, a JSON `message`); exceptions
inside a stream as `:message-type: exception` frames. Every request body received is checked
against botocore's service model for its operation (`ParamValidator` on the operation's input
shape); a body that breaks the model is answered 400 `ValidationException` with the validator's
report and recorded in `invalid`, so a test can assert that nothing invalid was sent.

`rules` emulate what a model family refuses although the service model allows it (see each rule's
source in tests that use them); a rule sees the received request and returns the
ValidationException message or None.

`s3Location` sources are resolved through `s3` (a client of moto's S3) as Bedrock reads them
with the caller's access: only for the families AWS lists as taking "Amazon S3 links for media"
(Amazon Nova Lite, Pro and Premier), only from a bucket in the request's region (the SigV4
credential scope's), owned by `bucketOwner` when one is given, and only an object that exists;
anything else is a ValidationException. Without `s3` every `s3Location` is refused.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import socketserver
import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

import botocore.session
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator

from turnkeep.providers.base import (
    AttachmentPart,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnkeep.providers.capabilities import DOCUMENT_FORMATS, IMAGE_FORMATS

_SERVICE = botocore.session.get_session().get_service_model("bedrock-runtime")
_OPERATIONS = {"converse-stream": "ConverseStream", "converse": "Converse"}


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
    """An `event` frame of type `name` with a JSON payload."""
    headers = {":message-type": "event", ":event-type": name, ":content-type": "application/json"}
    return frame(headers, json.dumps(body).encode())


def exception_event(name: str, message: str) -> bytes:
    """An `exception` frame, as the service sends an error after the stream began."""
    headers = {
        ":message-type": "exception",
        ":exception-type": name,
        ":content-type": "application/json",
    }
    return frame(headers, json.dumps({"message": message}).encode())


@dataclass
class Answer:
    """One response: event frames (optionally cut after `drop_after`, optionally `pace_seconds`
    apart: a slow model), a Converse JSON body, or an HTTP error (`status` != 200 with
    `error_type` and `error_message`)."""

    frames: list[bytes] = field(default_factory=list)
    drop_after: int | None = None
    status: int = 200
    error_type: str = ""
    error_message: str = ""
    json_body: dict[str, Any] | None = None
    pace_seconds: float = 0.0


@dataclass
class Received:
    """One request as the server read it."""

    operation: str
    model_id: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    resolved: dict[str, bytes] = field(default_factory=dict)
    """The bytes of each `s3Location` URI the request named, as the server read them."""

    def request(self) -> ModelRequest:
        """The request as the neutral model sees it, S3 sources resolved to their bytes."""
        return neutral_request(self.body, self.resolved)


Rule = Callable[["Received"], str | None]
Responder = Callable[[Received], Answer]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # skip HTTPServer's FQDN lookup
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]


def validation_errors(operation: str, model_id: str, body: dict[str, Any]) -> str | None:
    """botocore's report of how `body` (plus the URI's modelId) breaks the operation's input
    shape, or None when it is valid. JSON blobs arrive base64-encoded, which the validator
    accepts as strings."""
    shape = _SERVICE.operation_model(operation).input_shape
    assert shape is not None, operation  # every Bedrock runtime operation has an input
    report = ParamValidator().validate({"modelId": model_id, **body}, shape)
    return report.generate_report() if report.has_errors() else None


class BedrockWire:
    """The local server; answers come from `responder` or the `answers` queue."""

    def __init__(
        self,
        responder: Responder | None = None,
        rules: list[Rule] | None = None,
        *,
        s3: Any = None,
        account: str = "123456789012",
    ):
        self.s3 = s3
        """moto's S3, where `s3Location` sources are read (None: every one is refused)."""
        self.account = account
        """The account owning the buckets `s3` sees (moto's default account)."""
        self.answers: list[Answer] = []
        self.received: list[Received] = []
        self.invalid: list[str] = []
        self.responder = responder
        self.rules = list(rules or [])
        self.client_gone = threading.Event()
        """Set when a client closed its connection before a stream's frames were all written."""
        self._stopping = threading.Event()
        wire = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                _, _, encoded_id, action = self.path.split("/", 3)
                operation = _OPERATIONS[action]
                headers = {k.lower(): v for k, v in self.headers.items()}
                received = Received(operation, unquote(encoded_id), body, headers)
                wire.received.append(received)
                problem = validation_errors(operation, received.model_id, body)
                if problem is None:
                    problem = wire.resolve_s3_sources(received)
                if problem is None:
                    problem = service_errors(body, received.resolved)
                if problem is not None:
                    wire.invalid.append(problem)
                    self._error(
                        Answer(status=400, error_type="ValidationException", error_message=problem)
                    )
                    return
                for rule in wire.rules:
                    refused = rule(received)
                    if refused is not None:
                        self._error(
                            Answer(
                                status=400, error_type="ValidationException", error_message=refused
                            )
                        )
                        return
                answer = wire.responder(received) if wire.responder else wire.answers.pop(0)
                if answer.status != 200:
                    self._error(answer)
                elif answer.json_body is not None:
                    data = json.dumps(answer.json_body).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self._frames(answer)

            def _error(self, answer: Answer) -> None:
                data = json.dumps({"message": answer.error_message}).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("x-amzn-ErrorType", answer.error_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _frames(self, answer: Answer) -> None:
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
                    if answer.pace_seconds and wire._stopping.wait(answer.pace_seconds):
                        return
                    try:
                        self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        wire.client_gone.set()
                        self.close_connection = True
                        return
                self.wfile.write(b"0\r\n\r\n")

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def resolve_s3_sources(self, received: Received) -> str | None:
        """Read every `s3Location` of the request into `received.resolved`, or the
        ValidationException message of the first one Bedrock would refuse."""
        for location in s3_locations(received.body):
            uri = location["uri"]
            if not S3_SOURCE_MODELS.search(received.model_id):
                return f"The model {received.model_id} does not support S3 sources ({uri})."
            if self.s3 is None:
                return f"Unable to access the S3 object {uri}."
            bucket, _, key = uri[len("s3://") :].partition("/")
            try:
                where = self.s3.get_bucket_location(Bucket=bucket)["LocationConstraint"]
                data = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                return f"Unable to access the S3 object {uri}: {code}."
            region = request_region(received.headers)
            if (where or "us-east-1") != region:
                return f"The S3 object {uri} must be in the request's region {region}."
            owner = location.get("bucketOwner")
            if owner is not None and owner != self.account:
                return f"The bucket of {uri} is not owned by account {owner}."
            received.resolved[uri] = bytes(data)
        return None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def paths(self) -> list[str]:
        """`/model/<id>/<action>` of each request (ids percent-encoded as botocore sends them)."""
        from urllib.parse import quote

        action = {v: k for k, v in _OPERATIONS.items()}
        return [f"/model/{quote(r.model_id, safe='')}/{action[r.operation]}" for r in self.received]

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.received]

    def __enter__(self) -> BedrockWire:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()


# -- neutral <-> wire ------------------------------------------------------------------------------


def stream_frames(response: ModelResponse, *, piece: int = 5) -> list[bytes]:
    """ConverseStream frames carrying `response`: text, reasoning (text, then its signature) and
    tool arguments split into small deltas, then messageStop and metadata with its usage."""
    frames = [event("messageStart", {"role": "assistant"})]
    for index, part in enumerate(response.message.parts):
        if isinstance(part, TextPart):
            frames += [
                event("contentBlockDelta", {"delta": {"text": p}, "contentBlockIndex": index})
                for p in _pieces(part.text, piece)
            ]
        elif isinstance(part, ReasoningPart):
            deltas: list[dict[str, Any]] = [{"text": p} for p in _pieces(part.text, piece)]
            if part.signature:
                deltas.append({"signature": part.signature})
            if part.redacted:
                deltas.append({"redactedContent": part.redacted})  # base64, as JSON carries blobs
            frames += [
                event(
                    "contentBlockDelta",
                    {"delta": {"reasoningContent": d}, "contentBlockIndex": index},
                )
                for d in deltas
            ]
        elif isinstance(part, ToolCallPart):
            start = {"toolUse": {"toolUseId": part.id, "name": part.name}}
            frames.append(event("contentBlockStart", {"start": start, "contentBlockIndex": index}))
            frames += [
                event(
                    "contentBlockDelta",
                    {"delta": {"toolUse": {"input": p}}, "contentBlockIndex": index},
                )
                for p in _pieces(part.arguments, 3)
            ]
        frames.append(event("contentBlockStop", {"contentBlockIndex": index}))
    usage = response.usage
    frames += [
        event("messageStop", {"stopReason": response.stop_reason}),
        event(
            "metadata",
            {
                "usage": {
                    "inputTokens": usage.input_tokens,
                    "outputTokens": usage.output_tokens,
                    "totalTokens": usage.input_tokens + usage.output_tokens,
                    "cacheReadInputTokens": usage.cache_read_tokens,
                    "cacheWriteInputTokens": usage.cache_write_tokens,
                },
                "metrics": {"latencyMs": 1},
            },
        ),
    ]
    return frames


def converse_body(response: ModelResponse) -> dict[str, Any]:
    """The Converse (non-streamed) JSON response carrying `response`."""
    content: list[dict[str, Any]] = []
    for part in response.message.parts:
        if isinstance(part, TextPart):
            content.append({"text": part.text})
        elif isinstance(part, ToolCallPart):
            content.append(
                {
                    "toolUse": {
                        "toolUseId": part.id,
                        "name": part.name,
                        "input": json.loads(part.arguments),
                    }
                }
            )
    usage = response.usage
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": response.stop_reason,
        "usage": {
            "inputTokens": usage.input_tokens,
            "outputTokens": usage.output_tokens,
            "totalTokens": usage.input_tokens + usage.output_tokens,
        },
        "metrics": {"latencyMs": 1},
    }


def neutral_request(body: dict[str, Any], resolved: dict[str, bytes] | None = None) -> ModelRequest:
    """Map a received Converse request back to the neutral request (the server's view).

    Cache points and reasoning blocks are dropped (the scripted model has no use for them); the
    `status` of a tool result becomes `is_error`; an `s3Location` source gets its bytes from
    `resolved` (`Received.resolved`, read by the server).
    """
    found = resolved or {}
    system = "".join(b.get("text", "") for b in body.get("system", []))
    names: dict[str, str] = {}
    messages: list[Message] = []
    for raw in body["messages"]:
        parts: list[Part] = []
        results: list[Part] = []
        for block in raw["content"]:
            if "text" in block:
                parts.append(TextPart(block["text"]))
            elif "toolUse" in block:
                use = block["toolUse"]
                names[use["toolUseId"]] = use["name"]
                parts.append(ToolCallPart(use["toolUseId"], use["name"], json.dumps(use["input"])))
            elif "image" in block or "document" in block:
                parts.append(_received_attachment(block, found))
            elif "toolResult" in block:
                result = block["toolResult"]
                text = "".join(c.get("text", "") for c in result["content"])
                results.append(
                    ToolResultPart(
                        result["toolUseId"],
                        names[result["toolUseId"]],
                        text,
                        result.get("status") == "error",
                        attachments=tuple(
                            _received_attachment(c, found)
                            for c in result["content"]
                            if "image" in c
                        ),
                    )
                )
        if results:
            messages.append(Message("tool", tuple(results)))
        if parts:
            messages.append(
                Message("assistant" if raw["role"] == "assistant" else "user", tuple(parts))
            )
    tools = tuple(
        ToolSpec(
            t["toolSpec"]["name"],
            t["toolSpec"]["description"],
            t["toolSpec"]["inputSchema"]["json"],
        )
        for t in body.get("toolConfig", {}).get("tools", [])
        if "toolSpec" in t
    )
    return ModelRequest(system, tuple(messages), tools)


_MEDIA = {fmt: media for media, fmt in {**IMAGE_FORMATS, **DOCUMENT_FORMATS}.items()}


def _received_attachment(block: dict[str, Any], resolved: dict[str, bytes]) -> AttachmentPart:
    """An image or document block as the neutral part the scripted model describes."""
    kind = "image" if "image" in block else "document"
    inner = block[kind]
    source = inner["source"]
    data = (
        resolved[source["s3Location"]["uri"]]
        if "s3Location" in source
        else decoded(source["bytes"])
    )
    name = inner.get("name", f"{kind}.{inner['format']}")
    return AttachmentPart(f"wire-{kind}", name, _MEDIA[inner["format"]], len(data), data)


# Limits the service enforces that the service model does not state (the Converse API reference
# and the Bedrock user guide's Converse quotas, docs/attachments.md cites them).
MAX_IMAGE_BYTES = 3_750_000
MAX_DOCUMENT_BYTES = 4_500_000
_NAME_RULE = re.compile(r"[A-Za-z0-9\-()\[\]]+( [A-Za-z0-9\-()\[\]]+)*")


def service_errors(body: dict[str, Any], resolved: dict[str, bytes] | None = None) -> str | None:
    """What Bedrock refuses in a valid-shaped request: a document name outside its character
    rule or repeated, more than 20 images or 5 documents, an image over 3.75 MB or a
    document over 4.5 MB (the error texts follow the service's ValidationException wording).
    An `s3Location` source counts by the bytes `resolved` holds for it."""
    found = resolved or {}

    def data(source: dict[str, Any]) -> bytes:
        if "s3Location" in source:
            return found.get(source["s3Location"]["uri"], b"")
        return decoded(source.get("bytes", ""))

    images: list[bytes] = []
    names: list[str] = []
    for message in body.get("messages", []):
        for block in message["content"]:
            inner = [block, *block.get("toolResult", {}).get("content", [])]
            for item in inner:
                if "image" in item:
                    images.append(data(item["image"]["source"]))
                if "document" in item:
                    document = item["document"]
                    names.append(document["name"])
                    if len(data(document["source"])) > MAX_DOCUMENT_BYTES:
                        return f"The document {document['name']} exceeds 4.5 MB."
    for name in names:
        if not _NAME_RULE.fullmatch(name):
            return (
                "The format of the value at messages.content.document.name is invalid. Provide "
                "a name that contains only alphanumeric characters, whitespace characters (no "
                "more than one in a row), hyphens, parentheses, or square brackets."
            )
    if len({n.lower() for n in names}) < len(names):
        return "The document names must be unique."
    if len(images) > 20:
        return "Too many images: a request may contain at most 20."
    if len(names) > 5:
        return "Too many documents: a request may contain at most 5."
    if any(len(image) > MAX_IMAGE_BYTES for image in images):
        return "An image exceeds 3.75 MB."
    return None


# The families AWS's "Supported models and model features" table for Converse marks as taking
# "Amazon S3 links for media" (no other family, Claude included, does).
S3_SOURCE_MODELS = re.compile(r"amazon\.nova-(lite|pro|premier)")
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/bedrock/aws4_request")


def s3_locations(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every `s3Location` of a request's image and document sources, tool results' included."""
    found: list[dict[str, Any]] = []
    for message in body.get("messages", []):
        for block in message["content"]:
            for item in [block, *block.get("toolResult", {}).get("content", [])]:
                for kind in ("image", "document", "video"):
                    source = item.get(kind, {}).get("source", {})
                    if "s3Location" in source:
                        found.append(source["s3Location"])
    return found


def request_region(headers: dict[str, str]) -> str:
    """The region a request was signed for (its SigV4 credential scope), '' when unsigned."""
    match = _SCOPE.search(headers.get("authorization", ""))
    return match.group(1) if match else ""


def reasoning_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every `reasoningContent` block the request sends back, in order."""
    return [
        block["reasoningContent"]
        for message in body["messages"]
        for block in message["content"]
        if "reasoningContent" in block
    ]


def decoded(blob: str) -> bytes:
    """A JSON-carried blob's bytes."""
    return base64.b64decode(blob)


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]
