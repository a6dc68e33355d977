"""Tracing off costs nothing: without an OTLP endpoint no OpenTelemetry module is imported and
spans are no-ops; the turn's trace context is a W3C `traceparent` (docs/tracing.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from turnkeep.telemetry import new_trace_parent, parse_trace_parent, span, tracing_enabled

_TURN_WITHOUT_ENDPOINT = """
import sys, uuid
from turnkeep.envelope import open_envelope_store
from turnkeep.harness import HarnessDeps, HarnessLimits, run_turn
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import open_storage
from turnkeep.tools.builtin import builtin_tools
url = f"memory://{uuid.uuid4().hex}"
envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
envelopes.create("s1", "u1")
deps = HarnessDeps(open_storage=lambda sid: open_storage(url, sid), envelopes=envelopes,
    provider=ScriptedProvider(), tools=lambda _s, _u: builtin_tools(),
    limits=HarnessLimits(frame_interval_ms=0))
result = run_turn(deps, "s1", "u1", 'call echo {"text": "hi"}')
assert result.status == "completed", result
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def _env_without_otel() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}


def test_a_turn_without_an_otlp_endpoint_imports_no_opentelemetry_module() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _TURN_WITHOUT_ENDPOINT],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=_env_without_otel(),
    )

    assert done.stdout.strip() == "[]"


def test_tracing_is_on_with_an_endpoint_and_off_when_the_sdk_is_disabled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert not tracing_enabled()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/v1/traces")
    assert tracing_enabled()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not tracing_enabled()


def test_a_span_with_tracing_off_records_nothing_and_still_propagates_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)

    with span("chat x", new_trace_parent(), {"a": 1}) as recorder:
        assert not recorder.recording
        recorder.set({"b": 2})
    with pytest.raises(KeyError), span("chat x", new_trace_parent(), {}):
        raise KeyError("boom")


def test_a_new_trace_parent_is_a_sampled_w3c_traceparent_that_parses_back() -> None:
    text = new_trace_parent()

    parsed = parse_trace_parent(text)

    assert parsed is not None
    assert text == f"00-{parsed[0]:032x}-{parsed[1]:016x}-01"
    assert new_trace_parent() != text


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "00-" + "0" * 32 + "-" + "1" * 16 + "-01",  # an all-zero trace id is invalid
        "00-" + "a" * 32 + "-" + "0" * 16 + "-01",
        "01-" + "a" * 32 + "-" + "b" * 16 + "-01",
        "00-" + "A" * 32 + "-" + "b" * 16 + "-01",
    ],
)
def test_a_missing_or_malformed_trace_parent_gives_no_parent(text: str | None) -> None:
    assert parse_trace_parent(text) is None
