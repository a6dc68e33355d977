"""The OpenTelemetry SDK behind `turnkeep.telemetry.spans`: imported only when tracing is on.

One tracer provider per process (rebuilt when the configured endpoint changes), exporting
with the SDK's OTLP/HTTP exporter through a batch processor; the exporter reads the standard
`OTEL_EXPORTER_OTLP_*` settings itself. The provider is never made the global one: an
application's own OpenTelemetry setup is left alone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.trace.span import TraceFlags

from turnkeep.telemetry.spans import (
    ENDPOINT_ENV,
    TRACES_ENDPOINT_ENV,
    AttributeValue,
)
from turnkeep.telemetry.spans import (
    SpanKind as KindName,
)

_KINDS = {"client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL}
_preset: ContextVar[tuple[int, int] | None] = ContextVar("turnkeep_preset_ids", default=None)


class _PresetIds(RandomIdGenerator):
    """Random ids, except for the turn span, whose ids were chosen when the turn started."""

    def generate_span_id(self) -> int:
        preset = _preset.get()
        return preset[1] if preset is not None else super().generate_span_id()

    def generate_trace_id(self) -> int:
        preset = _preset.get()
        return preset[0] if preset is not None else super().generate_trace_id()


_lock = threading.Lock()
_built: list[tuple[str, TracerProvider, trace.Tracer]] = []
"""The process's provider, as (endpoint, provider, tracer); at most one."""


def _endpoint() -> str:
    return os.environ.get(TRACES_ENDPOINT_ENV) or os.environ.get(ENDPOINT_ENV) or ""


def _tracer() -> trace.Tracer:
    endpoint = _endpoint()
    with _lock:
        if _built and _built[0][0] == endpoint:
            return _built[0][2]
        if _built:
            _built.pop()[1].shutdown()
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        service = os.environ.get("OTEL_SERVICE_NAME") or "turnkeep"
        provider = TracerProvider(
            resource=Resource.create({"service.name": service}), id_generator=_PresetIds()
        )
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        tracer = provider.get_tracer("turnkeep")
        _built.append((endpoint, provider, tracer))
        return tracer


def _parent_context(parent: tuple[int, int]) -> Any:
    context = SpanContext(
        trace_id=parent[0],
        span_id=parent[1],
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(context))


def _clean(attributes: Mapping[str, AttributeValue | None]) -> dict[str, AttributeValue]:
    return {key: value for key, value in attributes.items() if value is not None}


def set_attributes(span: Any, attributes: Mapping[str, AttributeValue | None]) -> None:
    """Set the non-None `attributes` on an open span."""
    span.set_attributes(_clean(attributes))


def set_error(span: Any, error_type: str, message: str | None) -> None:
    """Mark a span failed (status ERROR, `error.type`)."""
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, message))


@contextmanager
def child_span(
    name: str,
    parent: tuple[int, int],
    attributes: Mapping[str, AttributeValue | None],
    kind: KindName,
) -> Iterator[Any]:
    """A span under the turn span `parent`, ended when the block ends."""
    opened = _tracer().start_span(
        name, context=_parent_context(parent), kind=_KINDS[kind], attributes=_clean(attributes)
    )
    try:
        yield opened
    except BaseException as exc:
        opened.record_exception(exc)
        set_error(opened, type(exc).__name__, str(exc))
        raise
    finally:
        opened.end()


def ended_span(
    name: str,
    parent: tuple[int, int],
    attributes: Mapping[str, AttributeValue | None],
    start: float,
    end: float,
    *,
    turn: bool,
    error: str | None,
    kind: KindName,
) -> None:
    """A span of a past interval: the turn span itself (`turn`), or a child of it."""
    tracer = _tracer()
    start_ns, end_ns = int(start * 1e9), int(max(start, end) * 1e9)
    if turn:
        token = _preset.set(parent)
        try:
            opened = tracer.start_span(
                name,
                context=trace.set_span_in_context(trace.INVALID_SPAN),
                kind=_KINDS[kind],
                attributes=_clean(attributes),
                start_time=start_ns,
            )
        finally:
            _preset.reset(token)
    else:
        opened = tracer.start_span(
            name,
            context=_parent_context(parent),
            kind=_KINDS[kind],
            attributes=_clean(attributes),
            start_time=start_ns,
        )
    if error is not None:
        set_error(opened, error, None)
    opened.end(end_time=end_ns)


def force_flush() -> None:
    """Export what the batch processor holds (no-op before the first span)."""
    for _, provider, _ in list(_built):
        provider.force_flush()
