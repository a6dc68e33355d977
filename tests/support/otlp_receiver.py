"""A real OTLP/HTTP trace receiver on 127.0.0.1 for the tracing tests: it accepts what the
OpenTelemetry SDK's exporter POSTs to `/v1/traces` (protobuf, optionally gzip) and decodes it
with `opentelemetry-proto`, as a collector would. Anything else is answered 404 / 400."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return None if kind is None else getattr(value, kind)


@dataclass(frozen=True)
class ReceivedSpan:
    """One decoded span, ids in hex as a trace viewer shows them."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int
    service: str


@dataclass
class OtlpReceiver:
    """The spans received so far (thread-safe) and the requests that carried them."""

    url: str = ""
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    rejected: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, body: bytes) -> bool:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError:
            with self._lock:
                self.rejected += 1
            return False
        decoded = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    decoded.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            status_code=span.status.code,
                            service=str(resource.get("service.name", "")),
                        )
                    )
        with self._lock:
            self.requests += 1
            self.spans.extend(decoded)
        return True

    def snapshot(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def clear(self) -> None:
        with self._lock:
            self.spans.clear()
            self.requests = 0

    def wait_for(
        self, done: Callable[[list[ReceivedSpan]], bool], timeout: float = 20.0
    ) -> list[ReceivedSpan]:
        """The spans once `done(spans)` holds; fails after `timeout` seconds (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.snapshot()
            if done(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"spans never satisfied the wait: {[s.name for s in spans]}")
            time.sleep(0.05)

    def trace_of(self, op_id: str, timeout: float = 20.0) -> list[ReceivedSpan]:
        """All spans of the trace whose `invoke_agent` span is turn `op_id`'s, once it came."""

        def turn_span(spans: list[ReceivedSpan]) -> ReceivedSpan | None:
            for span in spans:
                if span.name.startswith("invoke_agent") and (
                    span.attributes.get("turnkeep.turn.id") == op_id
                ):
                    return span
            return None

        spans = self.wait_for(lambda spans: turn_span(spans) is not None, timeout)
        root = turn_span(spans)
        assert root is not None
        return [s for s in spans if s.trace_id == root.trace_id]


def _handler(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if not receiver.add(body):
                self.send_error(400, "not an ExportTraceServiceRequest")
                return
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the tests read the decoded spans, not an access log

    return Handler


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A receiver listening on 127.0.0.1 (a free port) until the block ends."""
    receiver = OtlpReceiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
