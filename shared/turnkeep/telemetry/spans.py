"""The span API the harness calls: a no-op unless tracing is on (docs/tracing.md).

Tracing is on when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is
set and `OTEL_SDK_DISABLED` is not `true`. Off, no OpenTelemetry module is imported and each
call costs an environment lookup. Message content (prompts, replies, tool arguments and
results) goes on spans only with the GenAI conventions' opt-in
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from turnkeep.telemetry.trace_parent import parse_trace_parent

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
Attributes = Mapping[str, AttributeValue | None]
SpanKind = Literal["client", "internal"]

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def tracing_enabled() -> bool:
    """Whether spans are exported: an OTLP endpoint is set and the SDK is not disabled."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(os.environ.get(ENDPOINT_ENV) or os.environ.get(TRACES_ENDPOINT_ENV))


def capture_content() -> bool:
    """The conventions' opt-in for message content on spans (off by default)."""
    return os.environ.get(CONTENT_ENV, "").strip().lower() == "true"


class SpanRecorder:
    """Adds attributes to, or marks failed, one open span; does nothing when tracing is off."""

    __slots__ = ("_span",)

    def __init__(self, otel_span: Any = None) -> None:
        self._span = otel_span

    @property
    def recording(self) -> bool:
        """Whether anything set here is exported (callers skip building costly values)."""
        return self._span is not None

    def set(self, attributes: Attributes) -> None:
        """Set `attributes` (None values are left out)."""
        if self._span is not None:
            from turnkeep.telemetry import otel

            otel.set_attributes(self._span, attributes)

    def fail(self, error_type: str, message: str | None = None) -> None:
        """Mark the span failed with `error.type` (the conventions' error attribute)."""
        if self._span is not None:
            from turnkeep.telemetry import otel

            otel.set_error(self._span, error_type, message)


_OFF = SpanRecorder()


@contextmanager
def span(
    name: str,
    trace_parent: str | None,
    attributes: Attributes,
    *,
    kind: SpanKind = "internal",
) -> Iterator[SpanRecorder]:
    """A span, child of the turn span named by `trace_parent`, open for the block.

    An exception leaving the block is recorded on the span (and propagates). A turn without a
    stored trace context (started before it was recorded) gets no spans.
    """
    parent = parse_trace_parent(trace_parent) if tracing_enabled() else None
    if parent is None:
        yield _OFF
        return
    from turnkeep.telemetry import otel

    with otel.child_span(name, parent, attributes, kind) as opened:
        yield SpanRecorder(opened)


def record_span(
    name: str,
    trace_parent: str | None,
    *,
    start: float,
    end: float,
    attributes: Attributes,
    turn: bool = False,
    error: str | None = None,
    kind: SpanKind = "internal",
) -> None:
    """A span of an interval already over (`start`/`end` in epoch seconds).

    `turn`: this is the turn span itself, with the ids `trace_parent` names (emitted once, by
    the step that ends the turn); else a child of it. `error`: the span failed with that type.
    """
    parent = parse_trace_parent(trace_parent) if tracing_enabled() else None
    if parent is None:
        return
    from turnkeep.telemetry import otel

    otel.ended_span(name, parent, attributes, start, end, turn=turn, error=error, kind=kind)


def flush() -> None:
    """Export the spans still buffered (a Lambda step calls it before it returns)."""
    if tracing_enabled():
        from turnkeep.telemetry import otel

        otel.force_flush()
