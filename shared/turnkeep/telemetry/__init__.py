"""OpenTelemetry GenAI spans of a turn (docs/tracing.md): off and free unless
`OTEL_EXPORTER_OTLP_ENDPOINT` is set, when the SDK and its OTLP exporter are imported.

`spans` and `trace_parent` import nothing of turnkeep; `genai` shapes the harness's values
(`turnkeep.providers` types) into the GenAI conventions' attributes.
"""

from turnkeep.telemetry.spans import (
    SpanRecorder,
    capture_content,
    flush,
    record_span,
    span,
    tracing_enabled,
)
from turnkeep.telemetry.trace_parent import new_trace_parent, parse_trace_parent

__all__ = [
    "SpanRecorder",
    "capture_content",
    "flush",
    "new_trace_parent",
    "parse_trace_parent",
    "record_span",
    "span",
    "tracing_enabled",
]
