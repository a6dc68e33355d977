"""Typed turns on the wire: the real Bedrock and Chat Completions providers against their
local wire-level servers (answers computed by the scripted model from the request as received).
`final_result` is offered with its schema, a valid result completes the turn, and a round that
must end the turn (after a text-only reply) forces the tool: Bedrock `toolChoice.tool`, Chat
Completions `tool_choice.function` (docs/agent.md, "Typed results")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import boto3
import pytest
from botocore.config import Config
from pydantic import BaseModel

from tests.support.bedrock_wire import (
    Answer,
    BedrockWire,
    Received,
    converse_body,
    stream_frames,
)
from tests.support.bedrock_wire import neutral_request as bedrock_neutral
from tests.support.openai_server import ChatServer, Reply, neutral_request, sse_reply
from tests.support.wire_turns import WireSession
from turnkeep import Agent
from turnkeep.providers.base import (
    Message,
    ModelResponse,
    ResponseDone,
    TextDelta,
    TextPart,
    Usage,
)
from turnkeep.providers.bedrock import BedrockProvider
from turnkeep.providers.openai_compat import OpenAICompatProvider
from turnkeep.providers.scripted import ScriptedProvider

CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"
VALID = 'call final_result {"label": "bug", "confidence": 0.25}'


class Verdict(BaseModel):
    label: Literal["bug", "feature"]
    confidence: float


def _typed(session: WireSession) -> WireSession:
    session.deps.agent = Agent(output_type=Verdict, output_retries=1)
    return session


def _chat_scripted(body: dict[str, Any]) -> Reply:
    return sse_reply(list(ScriptedProvider().stream(neutral_request(body))))


def _bedrock_scripted(received: Received) -> Answer:
    response = ScriptedProvider().complete(bedrock_neutral(received.body))
    if received.operation == "Converse":
        return Answer(json_body=converse_body(response))
    return Answer(stream_frames(response))


@pytest.fixture
def bedrock() -> Iterator[tuple[BedrockWire, WireSession]]:
    with BedrockWire() as wire:
        wire.responder = _bedrock_scripted
        client = boto3.client(
            "bedrock-runtime",
            endpoint_url=wire.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"total_max_attempts": 1}),
        )
        yield wire, _typed(WireSession(BedrockProvider(CLAUDE, client)))


def test_chat_completions_offers_final_result_and_a_valid_result_completes() -> None:
    with ChatServer(responder=_chat_scripted) as server:
        session = _typed(WireSession(OpenAICompatProvider(server.base_url, "m", timeout=10)))
        result = session.turn(VALID)

    assert result.status == "completed", result.error
    assert result.output == {"label": "bug", "confidence": 0.25}
    tools = {t["function"]["name"]: t for t in server.requests[0].body["tools"]}
    assert tools["final_result"]["function"]["parameters"] == Verdict.model_json_schema()
    assert "tool_choice" not in server.requests[0].body


def test_chat_completions_forces_final_result_after_a_text_reply() -> None:
    with ChatServer(responder=_chat_scripted) as server:
        session = _typed(WireSession(OpenAICompatProvider(server.base_url, "m", timeout=10)))
        result = session.turn("hello")

    assert (result.status, result.error_code) == ("failed", "output_invalid")
    first, second = (r.body for r in server.requests)
    assert "tool_choice" not in first
    assert second["tool_choice"] == {"type": "function", "function": {"name": "final_result"}}


def test_bedrock_offers_final_result_and_forces_it_after_a_text_reply(
    bedrock: tuple[BedrockWire, WireSession],
) -> None:
    wire, session = bedrock

    valid = session.turn(VALID)
    forced = session.turn("hello")

    assert valid.status == "completed", valid.error
    assert valid.output == {"label": "bug", "confidence": 0.25}
    assert (forced.status, forced.error_code) == ("failed", "output_invalid")
    configs = [r.body["toolConfig"] for r in wire.received]
    names = [t["toolSpec"]["name"] for t in configs[0]["tools"] if "toolSpec" in t]
    assert "final_result" in names
    assert "toolChoice" not in configs[0]
    assert configs[-1]["toolChoice"] == {"tool": {"name": "final_result"}}


def _native_server(body: dict[str, Any]) -> Reply:
    """A server with structured output: a `response_format` request is answered with the
    schema's JSON as content; any other as the scripted model answers it."""
    if "response_format" in body:
        text = '{"label": "feature", "confidence": 1.0}'
        done = ModelResponse(Message("assistant", (TextPart(text),)), "end_turn", Usage(5, 9))
        return sse_reply([TextDelta(text[:10]), TextDelta(text[10:]), ResponseDone(done)])
    return _chat_scripted(body)


def test_chat_completions_native_output_asks_for_json_schema_and_settles_as_final_result() -> None:
    with ChatServer(responder=_native_server) as server:
        provider = OpenAICompatProvider(server.base_url, "m", timeout=10, native_output=True)
        session = _typed(WireSession(provider))
        result = session.turn("hello")  # text first: the next round must end the turn

    assert result.status == "completed", result.error
    assert result.output == {"label": "feature", "confidence": 1.0}
    first, second = (r.body for r in server.requests)
    assert "response_format" not in first
    assert second["tool_choice"] == "none"
    assert second["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "final_result", "schema": Verdict.model_json_schema()},
    }
    calls = [m.tool_calls for m, _ in session.entries() if m.role == "assistant"][-1]
    assert [c.name for c in calls] == ["final_result"]  # one behaviour: a final_result call
