"""One trace per turn across the state machine's Lambdas: the template's turn state machine
under moto runs the real step handlers, each exporting its spans with the OTLP/HTTP exporter to
a real receiver on 127.0.0.1, and every step's span is a child of the one `invoke_agent` span
(the trace context travels with the turn's stored state, docs/tracing.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver
from tests.support.state_machine import Deployed, deploy, run_turn


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as running:
        yield running


@pytest.fixture
def traced_stack(receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    with deploy(
        monkeypatch,
        "STANDARD",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        OTEL_SERVICE_NAME="turnkeep-steps",
    ) as stack:
        yield stack


def test_a_turn_through_the_state_machine_is_one_trace_of_its_steps_spans(
    traced_stack: Deployed, receiver: OtlpReceiver
) -> None:
    op_id, _output = run_turn(traced_stack, "s-traced", 'call echo {"text": "across lambdas"}')

    spans = receiver.trace_of(op_id)
    root_id = next(s.span_id for s in spans if s.name.startswith("invoke_agent"))
    spans = receiver.wait_for(lambda got: sum(s.trace_id == spans[0].trace_id for s in got) >= 4)
    trace = [s for s in spans if s.trace_id == spans[0].trace_id]
    names = sorted(s.name.split(" ")[0] for s in trace)
    assert names == ["chat", "chat", "execute_tool", "invoke_agent"]
    assert all(s.parent_span_id == root_id for s in trace if not s.name.startswith("invoke"))
    assert {s.service for s in trace} == {"turnkeep-steps"}
    # Each step ran in its own hosted Lambda invocation and flushed before returning.
    steps = [c[0] for c in traced_stack.host.calls]
    assert steps.count("ModelStepFunction") >= 2, steps
    tool = next(s for s in trace if s.name == "execute_tool echo")
    assert tool.attributes["gen_ai.tool.name"] == "echo"
    assert "gen_ai.tool.call.result" not in tool.attributes
