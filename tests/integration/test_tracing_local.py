"""A turn's OpenTelemetry GenAI spans, run in-process, exported by the SDK's OTLP/HTTP exporter
to a real receiver on 127.0.0.1 that decodes the protobuf (docs/tracing.md)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.integration.turns_support import Harness, RecordingProvider, make_turn_harness
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver
from turnkeep.harness import HarnessLimits, StartTurnInput, resume_turn, run_turn, start_turn
from turnkeep.harness.approvals import decide
from turnkeep.harness.state import load_state, op_address
from turnkeep.providers.factory import provider_from_config
from turnkeep.storage import set_value
from turnkeep.telemetry import flush
from turnkeep.tools.base import Tool, ToolContext, ToolResult
from turnkeep.tools.builtin import ECHO

USER = "user-1"
ERROR = 2  # the OTLP status code of a failed span


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as running:
        yield running


@pytest.fixture
def traced(receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> OtlpReceiver:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "turnkeep-test")
    return receiver


def _trace(receiver: OtlpReceiver, op_id: str, expected: int) -> list[ReceivedSpan]:
    flush()
    receiver.trace_of(op_id)
    root_trace = receiver.trace_of(op_id)[0].trace_id
    return receiver.wait_for(lambda spans: sum(s.trace_id == root_trace for s in spans) >= expected)


def _of_trace(spans: list[ReceivedSpan], op_id: str) -> list[ReceivedSpan]:
    root = next(s for s in spans if s.attributes.get("turnkeep.turn.id") == op_id)
    return [s for s in spans if s.trace_id == root.trace_id]


def _root(spans: list[ReceivedSpan]) -> ReceivedSpan:
    (root,) = [s for s in spans if s.name.startswith("invoke_agent")]
    return root


def test_a_turn_with_a_tool_call_arrives_as_one_trace_of_genai_spans(
    traced: OtlpReceiver, tmp_path: Path
) -> None:
    h = make_turn_harness(tmp_path, "sqlite", tools=[ECHO])

    result = run_turn(h.deps, h.session_id, USER, 'call echo {"text": "hi"}')

    assert result.status == "completed"
    spans = _of_trace(_trace(traced, result.op_id, 4), result.op_id)
    root = _root(spans)
    assert root.parent_span_id == ""
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.conversation.id"] == h.session_id
    assert root.attributes["turnkeep.turn.status"] == "completed"
    assert root.service == "turnkeep-test"
    chats = sorted((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_ns)
    tools = [s for s in spans if s.name == "execute_tool echo"]
    assert len(chats) == 2
    assert len(tools) == 1
    assert all(s.parent_span_id == root.span_id for s in [*chats, *tools])
    first = chats[0].attributes
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == h.provider.name  # no model id: the provider name
    assert first["gen_ai.provider.name"] == h.provider.name
    assert first["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert first["gen_ai.usage.input_tokens"] > 0
    assert first["gen_ai.usage.output_tokens"] > 0
    assert "gen_ai.usage.cache_read.input_tokens" in first
    assert chats[1].attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    tool = tools[0].attributes
    assert tool["gen_ai.tool.name"] == "echo"
    assert tool["gen_ai.tool.call.id"].startswith("call_")
    # The turn's usage is the sum of its rounds'.
    assert root.attributes["gen_ai.usage.input_tokens"] == sum(
        c.attributes["gen_ai.usage.input_tokens"] for c in chats
    )
    # Content is off by default.
    assert not any(
        key in s.attributes
        for s in spans
        for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.result")
    )


def test_message_content_goes_on_the_spans_only_with_the_conventions_opt_in(
    traced: OtlpReceiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    h = make_turn_harness(tmp_path, tools=[ECHO])

    result = run_turn(h.deps, h.session_id, USER, 'call echo {"text": "secret-ish"}')

    spans = _of_trace(_trace(traced, result.op_id, 4), result.op_id)
    tool = next(s for s in spans if s.name == "execute_tool echo").attributes
    assert tool["gen_ai.tool.call.arguments"] == '{"text": "secret-ish"}'
    assert tool["gen_ai.tool.call.result"] == "secret-ish"
    last_chat = max((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_ns)
    assert "secret-ish" in last_chat.attributes["gen_ai.input.messages"]
    assert "Tool echo returned" in last_chat.attributes["gen_ai.output.messages"]


def test_a_failed_turn_ends_its_turn_span_with_an_error_status(
    traced: OtlpReceiver, tmp_path: Path
) -> None:
    h = make_turn_harness(tmp_path, limits=HarnessLimits(frame_interval_ms=0, max_steps=1))

    result = run_turn(h.deps, h.session_id, USER, 'call echo {"text": "a"}')

    assert result.status == "failed"
    root = _root(_of_trace(_trace(traced, result.op_id, 2), result.op_id))
    assert root.status_code == ERROR
    assert root.attributes["error.type"] == "turn_failed"


class SendArgs(BaseModel):
    to: str


@dataclass
class Outbox:
    sent: list[str] = field(default_factory=list)

    def tool(self) -> Tool[SendArgs]:
        def send(args: SendArgs, ctx: ToolContext) -> ToolResult:
            self.sent.append(args.to)
            return ToolResult(f"sent to {args.to}")

        return Tool(
            "send_mail",
            "send an email",
            SendArgs,
            send,
            isolation="in_process",
            requires_approval=True,
        )


def test_an_approval_wait_is_a_span_from_the_request_to_the_decision(
    traced: OtlpReceiver, tmp_path: Path
) -> None:
    outbox = Outbox()
    h = make_turn_harness(tmp_path, tools=[outbox.tool()])
    paused = run_turn(h.deps, h.session_id, USER, 'call send_mail {"to": "bob@example.com"}')
    assert paused.status == "awaiting_approval"
    h.clock.advance(42)

    decide(
        h.deps,
        h.session_id,
        paused.op_id,
        paused.awaiting_call_ids[0],
        user_id=USER,
        decision="approve",
    )
    result = resume_turn(h.deps, h.session_id, paused.op_id)

    assert result.status == "completed"
    assert outbox.sent == ["bob@example.com"]
    spans = _of_trace(_trace(traced, result.op_id, 5), result.op_id)
    (wait,) = [s for s in spans if s.name == "approval_wait send_mail"]
    assert wait.parent_span_id == _root(spans).span_id
    assert wait.attributes["turnkeep.approval.decision"] == "approve"
    assert wait.attributes["gen_ai.tool.call.id"] == paused.awaiting_call_ids[0]
    assert wait.end_ns - wait.start_ns == 42 * 10**9


def test_a_compaction_is_a_span_of_its_own_with_the_tokens_it_used(
    traced: OtlpReceiver, tmp_path: Path
) -> None:
    inner = provider_from_config("scripted?context=3000")
    recorder = RecordingProvider(inner=inner)
    recorder.context = inner.context
    h: Harness = make_turn_harness(
        tmp_path, provider=recorder, limits=HarnessLimits(frame_interval_ms=0), tools=[ECHO]
    )
    ops = []
    for i in range(40):
        text = f"message {i}: " + "lorem ipsum dolor " * (i % 7 + 2)
        ops.append(run_turn(h.deps, h.session_id, USER, text).op_id)
    flush()

    spans = traced.wait_for(
        lambda spans: (
            any(s.name == "compaction context" for s in spans)
            and all(any(s.attributes.get("turnkeep.turn.id") == op for s in spans) for op in ops)
        )
    )
    compaction = next(s for s in spans if s.name == "compaction context")
    owner = next(
        s for s in spans if s.name.startswith("invoke_agent") and s.trace_id == compaction.trace_id
    )
    assert compaction.parent_span_id == owner.span_id
    assert compaction.attributes["gen_ai.usage.output_tokens"] > 0
    assert (
        compaction.attributes["turnkeep.context.tokens_after"]
        < compaction.attributes["turnkeep.context.tokens_before"]
    )


def test_a_turn_stored_without_a_trace_context_runs_on_and_exports_no_spans(
    traced: OtlpReceiver, tmp_path: Path
) -> None:
    h = make_turn_harness(tmp_path, "sqlite", tools=[ECHO])
    op = "op-untraced"
    start_turn(
        h.deps,
        StartTurnInput(session_id=h.session_id, op_id=op, user_id=USER, text="call echo {}"),
    )
    with h.storage() as storage:  # as a turn started before the field existed was stored
        state = load_state(storage, op)
        assert state is not None
        assert state.trace_parent is not None
        old = state.model_copy(update={"trace_parent": None}).model_dump(mode="json")
        storage.commit([set_value(op_address(op), old)])

    result = resume_turn(h.deps, h.session_id, op)
    traced_turn = run_turn(h.deps, h.session_id, USER, "hello")
    flush()

    assert result.status == "completed"
    traced.trace_of(traced_turn.op_id)  # spans of the next turn arrive; none of this one
    assert not any(s.attributes.get("turnkeep.turn.id") == op for s in traced.snapshot())
