"""Show: a full multi-round turn through the harness orchestrator with each real provider.

The script makes two parallel tool calls per round for three rounds (one call per later round
carries arguments that violate the schema or are not JSON: the model sees a tool error, the
turn goes on), then answers. The turn runs three times on fresh storage with the same op id:

1. with the scripted model itself (the reference transcript);
2. with BedrockProvider on a Stubber-backed `bedrock-runtime` client: every round's
   ConverseStream response carries the scripted answer as real stream events (text and tool
   arguments split into many deltas), and Stubber's `expected_params` asserts the harness sent
   exactly the Converse request the scripted run's transcript maps to;
3. with OpenAICompatProvider against a local Chat Completions server whose answers are computed
   by the scripted model from the request *as received on the wire* (mapped back to neutral
   messages), streamed as SSE chunks — so a lossy request mapping changes the transcript.

Each run's transcript (entry ids, messages, stop reasons) and turn result must equal run 1's.
The last tests show the error taxonomy through the harness: a throttled round is retried by the
caller, a dropped stream is recorded as an interrupted round, a context-length error fails the
turn with the server's message.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest

from tests.support.bedrock_stub import EventStreamStub, EventStreamStubber
from tests.support.openai_server import ChatServer, Reply, neutral_request, sse_reply
from turnkeep.envelope import MemoryEnvelopeStore
from turnkeep.harness import HarnessDeps, TurnResult, run_turn
from turnkeep.harness.state import load_head
from turnkeep.harness.transcript import entry_message
from turnkeep.providers.base import (
    Message,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamEvent,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from turnkeep.providers.bedrock import BedrockProvider
from turnkeep.providers.openai_compat import OpenAICompatProvider
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import open_storage

SESSION = "show-session"
USER = "show-user"
OP = "op-show-turn"
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
SCRIPT = (
    'call calculator {"expression": "6*7"}\n'
    'call echo {"text": "first round"}\n'
    "then\n"
    'call echo {"text": "second round"}\n'
    'call calculator {"expr": "1+1"}\n'
    "then\n"
    'call calculator {"expression": "2**10"}\n'
    'call echo {"text": '
)

Transcript = list[tuple[str, Message, object]]


class RecordingProvider(ModelProvider):
    """Wraps a provider and keeps every request and settled response, in order."""

    name = "recording"

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner
        self.rounds: list[tuple[ModelRequest, ModelResponse]] = []

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        for event in self.inner.stream(request):
            if isinstance(event, ResponseDone):
                self.rounds.append((request, event.response))
            yield event


def run_show_turn(provider: ModelProvider) -> tuple[TurnResult, Transcript]:
    """One turn of SCRIPT on fresh memory storage; returns its result and stored transcript."""
    url = f"memory://show-{uuid.uuid4().hex}"
    envelopes = MemoryEnvelopeStore()
    envelopes.create(SESSION, USER, {})
    deps = HarnessDeps(
        open_storage=lambda session_id: open_storage(url, session_id),
        envelopes=envelopes,
        provider=provider,
    )
    result = run_turn(deps, SESSION, USER, SCRIPT, op_id=OP)
    storage = deps.open_storage(SESSION)
    try:
        head = load_head(storage)
        assert head is not None
        transcript: Transcript = []
        for entry in storage.scan_branch(head):
            message = entry_message(entry)
            assert message is not None
            data = entry.data if isinstance(entry.data, dict) else {}
            transcript.append((entry.id, message, data.get("stop_reason")))
    finally:
        storage.close()
        envelopes.close()
    return result, transcript


@pytest.fixture(scope="module")
def reference() -> tuple[TurnResult, Transcript, RecordingProvider]:
    recorder = RecordingProvider(ScriptedProvider())
    result, transcript = run_show_turn(recorder)
    return result, transcript, recorder


def test_reference_turn_makes_two_tool_calls_per_round_and_reports_bad_arguments(
    reference: tuple[TurnResult, Transcript, RecordingProvider],
) -> None:
    result, transcript, recorder = reference

    assert result.status == "completed", result.error
    assert result.rounds == 4
    calls = [m.tool_calls for _, m, _ in transcript if m.role == "assistant" and m.tool_calls]
    assert [len(c) for c in calls] == [2, 2, 2]
    errors = [
        p for _, m, _ in transcript for p in m.parts if isinstance(p, ToolResultPart) and p.is_error
    ]
    assert len(errors) == 2
    assert len(recorder.rounds) == 4


# -- Bedrock ------------------------------------------------------------------------------------


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def converse_events(response: ModelResponse) -> list[dict[str, Any]]:
    """ConverseStream events carrying `response`, text and arguments split into many deltas."""
    events: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]
    for index, part in enumerate(response.message.parts):
        if isinstance(part, TextPart):
            events += [
                {"contentBlockDelta": {"delta": {"text": p}, "contentBlockIndex": index}}
                for p in _pieces(part.text, 5)
            ]
        elif isinstance(part, ToolCallPart):
            start = {"toolUse": {"toolUseId": part.id, "name": part.name}}
            events.append({"contentBlockStart": {"start": start, "contentBlockIndex": index}})
            events += [
                {
                    "contentBlockDelta": {
                        "delta": {"toolUse": {"input": p}},
                        "contentBlockIndex": index,
                    }
                }
                for p in _pieces(part.arguments, 3)
            ]
        events.append({"contentBlockStop": {"contentBlockIndex": index}})
    usage = response.usage
    events += [
        {"messageStop": {"stopReason": response.stop_reason}},
        {
            "metadata": {
                "usage": {
                    "inputTokens": usage.input_tokens,
                    "outputTokens": usage.output_tokens,
                    "totalTokens": usage.input_tokens + usage.output_tokens,
                },
                "metrics": {"latencyMs": 1},
            }
        },
    ]
    return events


def _bedrock_client() -> Any:
    """A Bedrock runtime client for botocore's stubber (it never sends a request)."""
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_turn_through_bedrock_converse_stream_equals_the_scripted_transcript(
    reference: tuple[TurnResult, Transcript, RecordingProvider],
) -> None:
    expected_result, expected_transcript, recorder = reference
    client = _bedrock_client()
    provider = BedrockProvider(MODEL, client)
    with EventStreamStubber(client) as stubber:
        for request, response in recorder.rounds:
            stubber.add_response(
                "converse_stream",
                {"stream": EventStreamStub(converse_events(response))},
                expected_params=provider.converse_arguments(request),
            )

        result, transcript = run_show_turn(provider)

        stubber.assert_no_pending_responses()
    assert result.status == "completed", result.error
    assert transcript == expected_transcript
    # The same tokens; Bedrock's rounds are priced from the table, the scripted model's are free.
    assert (result.rounds, replace(result.usage, cost_micros=0)) == (
        expected_result.rounds,
        expected_result.usage,
    )
    assert expected_result.usage.cost_micros == 0
    assert result.usage.cost_micros > 0


# -- OpenAI-compatible --------------------------------------------------------------------------


def test_turn_through_openai_compatible_sse_equals_the_scripted_transcript(
    reference: tuple[TurnResult, Transcript, RecordingProvider],
) -> None:
    expected_result, expected_transcript, recorder = reference
    scripted = ScriptedProvider()

    def respond(body: dict[str, Any]) -> Reply:
        # The answer is computed from the request as received; the usage is the reference
        # round's, so the turn's totals show usage travelling through the final chunk.
        _, reference_response = recorder.rounds[len(server.requests) - 1]
        events = list(scripted.stream(neutral_request(body)))
        return sse_reply(events, reference_response.usage)

    with ChatServer(responder=respond) as server:
        provider = OpenAICompatProvider(server.base_url, "scripted-over-http", timeout=10)
        result, transcript = run_show_turn(provider)

    assert result.status == "completed", result.error
    assert len(server.requests) == expected_result.rounds
    assert all(r.body["stream"] is True for r in server.requests)
    assert transcript == expected_transcript
    assert (result.rounds, result.usage) == (expected_result.rounds, expected_result.usage)


# -- errors through the harness -----------------------------------------------------------------


def test_throttled_bedrock_round_is_retried_by_the_harness_and_the_transcript_is_unchanged(
    reference: tuple[TurnResult, Transcript, RecordingProvider],
) -> None:
    _, expected_transcript, recorder = reference
    client = _bedrock_client()
    provider = BedrockProvider(MODEL, client)
    with EventStreamStubber(client) as stubber:
        for number, (request, response) in enumerate(recorder.rounds):
            if number == 1:
                stubber.add_client_error(
                    "converse_stream",
                    service_error_code="ThrottlingException",
                    service_message="Too many requests, please wait before trying again.",
                    http_status_code=429,
                )
            stubber.add_response(
                "converse_stream",
                {"stream": EventStreamStub(converse_events(response))},
                expected_params=provider.converse_arguments(request),
            )

        result, transcript = run_show_turn(provider)

        stubber.assert_no_pending_responses()
    assert result.status == "completed", result.error
    assert transcript == expected_transcript


def test_context_length_error_fails_the_turn_with_the_server_message() -> None:
    message = "This model's maximum context length is 8192 tokens. However, you requested 9100."
    error = {"error": {"message": message, "code": "context_length_exceeded"}}

    with ChatServer(responder=lambda body: Reply(status=400, json_body=error)) as server:
        provider = OpenAICompatProvider(server.base_url, "small-model", timeout=10)
        result, transcript = run_show_turn(provider)

    assert result.status == "failed"
    assert result.error is not None
    assert "context_length" in result.error
    assert message in result.error
    assert len(server.requests) == 1  # fatal: never retried
    assert [m.role for _, m, _ in transcript] == ["user"]


def test_stream_dropped_mid_round_is_recorded_as_interrupted_and_the_turn_still_completes(
    reference: tuple[TurnResult, Transcript, RecordingProvider],
) -> None:
    expected_result, expected_transcript, _ = reference
    scripted = ScriptedProvider()
    requests = 0

    def respond(body: dict[str, Any]) -> Reply:
        nonlocal requests
        requests += 1
        reply = sse_reply(list(scripted.stream(neutral_request(body))))
        if requests == 2:
            # Round 1 streams its first call's opening chunks, then the connection dies.
            reply.drop_after = 3
        return reply

    with ChatServer(responder=respond) as server:
        provider = OpenAICompatProvider(server.base_url, "scripted-over-http", timeout=10)
        result, transcript = run_show_turn(provider)

    assert result.status == "completed", result.error
    assert requests == expected_result.rounds + 1  # every round once, plus the dropped attempt
    interrupted = [m for _, m, stop in transcript if m.role == "assistant" and stop is None]
    assert len(interrupted) == 1
    assert interrupted[0].tool_calls == ()  # a half-streamed call is never settled
    settled = [m for _, m, _ in transcript if m not in interrupted]
    assert settled == [m for _, m, _ in expected_transcript]
