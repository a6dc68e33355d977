"""BedrockProvider on the wire: a real botocore client against tests/support/bedrock_wire.py.

Every request the provider sends is checked against botocore's service model by the server
(`wire.invalid` stays empty); answers are genuine event-stream frames or Converse JSON; errors
are real HTTP error responses. Family rules the service model cannot express are emulated from
their documented sources:

- Llama / Mistral: "Conversation blocks and tool result blocks cannot be provided in the same
  turn." (issue #22, seen on Bedrock); `toolResult.status` is "only supported by Amazon Nova and
  Anthropic Claude 3 and 4 models" (the service model's documentation of the field; the refusal
  text follows Bedrock's wording for unsupported fields, "This model doesn't support the
  toolConfig.toolChoice.any field. Remove ... and try again.");
- Meta Llama: "This model doesn't support tool use in streaming mode." (the Bedrock feature table
  lists no streaming tool use for Llama; the message as reported for Llama 4 Maverick/Scout).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.support.bedrock_wire import (
    Answer,
    BedrockWire,
    Received,
    converse_body,
    decoded,
    event,
    neutral_request,
    reasoning_blocks,
    stream_frames,
)
from tests.support.wire_turns import WireSession
from turnkeep.cli.printer import describe
from turnkeep.plumbing import clients as plumbing_clients
from turnkeep.providers import bedrock
from turnkeep.providers.base import (
    FatalModelError,
    Message,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    ReasoningPart,
    ResponseDone,
    StreamEvent,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from turnkeep.providers.bedrock import BedrockProvider
from turnkeep.providers.compaction import is_compaction_request
from turnkeep.providers.factory import provider_from_config
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.providers.settings import ModelSettings

CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"
NOVA = "eu.amazon.nova-lite-v1:0"
LLAMA = "meta.llama3-1-70b-instruct-v1:0"
LLAMA4 = "us.meta.llama4-maverick-17b-instruct-v1:0"
TOOL = ToolSpec("lookup", "Look something up.", {"type": "object", "properties": {}})
OUTPUT_LIMIT = (
    "The maximum tokens you requested exceeds the model limit of 4096. Try again with a "
    "maximum tokens value that is lower than 4096."
)
OVERFLOW = (
    "The model returned the following errors: input length and `max_tokens` exceed context "
    "limit: 195000 + 8192 > 200000, decrease input length or `max_tokens` and try again"
)
SCRIPT = (
    'call calculator {"expression": "6*7"}\n'
    'call echo {"text": "first round"}\n'
    "then\n"
    'call echo {"text": "second round"}\n'
)


def _llama_family(model_id: str) -> bool:
    return ".llama" in model_id or "mistral." in model_id


def no_mixed_blocks(received: Received) -> str | None:
    if not _llama_family(received.model_id):
        return None
    for message in received.body["messages"]:
        kinds = {next(iter(b)) for b in message["content"]}
        if "toolResult" in kinds and "text" in kinds:
            return "Conversation blocks and tool result blocks cannot be provided in the same turn."
    return None


def no_tool_result_status(received: Received) -> str | None:
    if re.search(r"anthropic\.claude|amazon\.nova", received.model_id):
        return None
    for message in received.body["messages"]:
        for block in message["content"]:
            if "status" in block.get("toolResult", {}):
                return (
                    "This model doesn't support the toolResult.status field. Remove "
                    "toolResult.status and try again."
                )
    return None


def no_streamed_tool_use(received: Received) -> str | None:
    streamed = received.operation == "ConverseStream" and "toolConfig" in received.body
    if ".llama" in received.model_id and streamed:
        return "This model doesn't support tool use in streaming mode."
    return None


FAMILY_RULES = [no_mixed_blocks, no_tool_result_status, no_streamed_tool_use]


def client_for(wire: BedrockWire) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=wire.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )


@pytest.fixture
def wire() -> Iterator[BedrockWire]:
    with BedrockWire(rules=FAMILY_RULES) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh_fallback_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # Which models refused streamed tool use is remembered per process; each test starts afresh.
    monkeypatch.setattr(bedrock, "_CONVERSE_FOR_TOOLS", set(), raising=False)


def request(*messages: Message, tools: tuple[ToolSpec, ...] = (TOOL,)) -> ModelRequest:
    return ModelRequest("sys", messages or (Message("user", (TextPart("hi"),)),), tools)


def text_answer(text: str = "ok", **usage: int) -> Answer:
    response = ModelResponse(
        Message("assistant", (TextPart(text),)),
        "end_turn",
        Usage(**usage) if usage else Usage(3, 1),
    )
    return Answer(stream_frames(response))


def settled(events: list[StreamEvent]) -> ModelResponse:
    done = events[-1]
    assert isinstance(done, ResponseDone)
    return done.response


# -- errors: output limit vs context overflow (items 1, 2) ---------------------------------------


def test_an_output_limit_above_the_models_is_an_invalid_request_not_a_context_overflow(
    wire: BedrockWire,
) -> None:
    wire.answers.append(
        Answer(status=400, error_type="ValidationException", error_message=OUTPUT_LIMIT)
    )

    with pytest.raises(FatalModelError, match="exceeds the model limit of 4096") as caught:
        list(BedrockProvider(CLAUDE, client_for(wire), max_tokens=8192).stream(request()))

    assert caught.value.code == "invalid_request"


@pytest.mark.parametrize(
    "message",
    [
        OVERFLOW,
        "too many total text bytes",
        "Input is too long for requested model.",
        "prompt is too long: 210000 tokens > 200000 maximum",
    ],
)
def test_a_real_context_overflow_message_is_a_context_length_error(
    wire: BedrockWire, message: str
) -> None:
    wire.answers.append(Answer(status=400, error_type="ValidationException", error_message=message))

    with pytest.raises(FatalModelError) as caught:
        list(BedrockProvider(CLAUDE, client_for(wire)).stream(request()))

    assert caught.value.code == "context_length"


def _scripted_answer(received: Received) -> Answer:
    response = ScriptedProvider().complete(neutral_request(received.body))
    if received.operation == "Converse":
        return Answer(json_body=converse_body(response))
    return Answer(stream_frames(response))


def test_a_turn_over_the_output_limit_fails_at_once_without_a_useless_compaction(
    wire: BedrockWire,
) -> None:
    refuse = False

    def respond(received: Received) -> Answer:
        if refuse:
            return Answer(status=400, error_type="ValidationException", error_message=OUTPUT_LIMIT)
        return _scripted_answer(received)

    wire.responder = respond
    session = WireSession(BedrockProvider(CLAUDE, client_for(wire), max_tokens=8192))
    assert session.turn("an earlier turn to compact").status == "completed"
    refuse, before = True, len(wire.received)

    result = session.turn("and now?")

    assert result.status == "failed"
    assert result.error is not None
    assert result.error.startswith("model error (invalid_request)")
    assert "compaction" not in result.error
    assert len(wire.received) == before + 1  # one request, no compaction, no retry
    assert wire.invalid == []


def test_a_context_overflow_shrinks_the_context_and_the_turn_completes(
    wire: BedrockWire,
) -> None:
    overflow_once = False

    def respond(received: Received) -> Answer:
        nonlocal overflow_once
        if overflow_once:
            overflow_once = False
            return Answer(status=400, error_type="ValidationException", error_message=OVERFLOW)
        return _scripted_answer(received)

    wire.responder = respond
    session = WireSession(BedrockProvider(CLAUDE, client_for(wire)))
    assert session.turn("an earlier turn to compact").status == "completed"
    overflow_once = True

    result = session.turn("and now?")

    assert result.status == "completed", result.error
    systems = [
        "".join(b["text"] for b in r.body.get("system", []) if "text" in b) for r in wire.received
    ]
    assert any(is_compaction_request(s) for s in systems)
    assert wire.invalid == []


# -- region (item 3) -----------------------------------------------------------------------------


def test_aws_region_alone_is_honoured_by_the_default_client(
    wire: BedrockWire, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in ("AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", wire.url)
    monkeypatch.setattr(plumbing_clients, "_CLIENTS", {})
    wire.answers.append(text_answer("bonjour"))

    provider = BedrockProvider(CLAUDE)
    out = list(provider.stream(request()))

    assert settled(out).message.text == "bonjour"
    assert provider.client.meta.region_name == "eu-west-3"
    assert "/eu-west-3/bedrock/aws4_request" in wire.received[0].headers["authorization"]


# -- families: tool-result status and text beside tool results (item 4) --------------------------


def _after_tools() -> tuple[Message, ...]:
    return (
        Message("user", (TextPart("look it up"),)),
        Message("assistant", (ToolCallPart("c1", "lookup", "{}"),)),
        Message("tool", (ToolResultPart("c1", "lookup", "not found", is_error=True),)),
        Message("user", (TextPart("never mind, say hi"),)),
    )


def test_llama_gets_tool_results_without_status_and_apart_from_user_text(
    wire: BedrockWire,
) -> None:
    wire.answers.append(Answer(json_body=converse_body(text_answer_response("hi"))))
    provider = BedrockProvider(LLAMA, client_for(wire), stream=False)

    out = list(provider.stream(request(*_after_tools())))

    assert settled(out).message.text == "hi"
    messages = wire.received[0].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    result = messages[2]["content"][0]["toolResult"]
    assert "status" not in result
    assert result["content"] == [{"text": "[tool error] not found"}]
    assert messages[4]["content"] == [{"text": "never mind, say hi"}]
    assert wire.invalid == []


def test_claude_keeps_status_and_text_beside_tool_results(wire: BedrockWire) -> None:
    wire.answers.append(text_answer("hi"))

    list(BedrockProvider(CLAUDE, client_for(wire)).stream(request(*_after_tools())))

    messages = wire.received[0].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    kinds = [next(iter(b)) for b in messages[2]["content"]]
    assert kinds == ["toolResult", "text", "cachePoint"]
    assert messages[2]["content"][0]["toolResult"]["status"] == "error"


def text_answer_response(text: str) -> ModelResponse:
    return ModelResponse(Message("assistant", (TextPart(text),)), "end_turn", Usage(5, 2))


# -- settings on the wire (item 10) --------------------------------------------------------------


def test_spec_options_and_request_settings_reach_the_wire_as_one_set_of_model_settings(
    wire: BedrockWire,
) -> None:
    extra = json.dumps({"top_k": 40})
    provider = provider_from_config(
        f"bedrock:{CLAUDE}?temperature=0.2&top_p=0.9&stop=END&stop=STOP&tool_choice=lookup"
        f"&guardrail=gr-abc123:3&extra={extra}&max_tokens=512",
        bedrock_client=client_for(wire),
    )
    wire.answers.append(text_answer())
    settings = ModelSettings(temperature=0.7, tool_choice="required")

    list(provider.stream(ModelRequest("sys", request().messages, (TOOL,), settings=settings)))

    body = wire.received[0].body
    assert body["inferenceConfig"] == {
        "maxTokens": 512,
        "temperature": 0.7,  # the request's setting overrides the spec's
        "topP": 0.9,
        "stopSequences": ["END", "STOP"],
    }
    assert body["toolConfig"]["toolChoice"] == {"any": {}}
    assert body["guardrailConfig"] == {
        "guardrailIdentifier": "gr-abc123",
        "guardrailVersion": "3",
        "trace": "disabled",
    }
    assert body["additionalModelRequestFields"] == {"top_k": 40}
    assert wire.invalid == []


@pytest.mark.parametrize(
    ("choice", "sent"),
    [("auto", {"auto": {}}), ("required", {"any": {}}), ("lookup", {"tool": {"name": "lookup"}})],
)
def test_tool_choice_maps_to_converse_tool_choice(
    wire: BedrockWire, choice: str, sent: dict[str, Any]
) -> None:
    wire.answers.append(text_answer())
    provider = BedrockProvider(CLAUDE, client_for(wire), settings=ModelSettings(tool_choice=choice))

    list(provider.stream(request()))

    assert wire.received[0].body["toolConfig"]["toolChoice"] == sent
    assert wire.invalid == []


def test_tool_choice_none_sends_no_tools_and_renders_earlier_calls_as_text(
    wire: BedrockWire,
) -> None:
    wire.answers.append(text_answer())
    provider = BedrockProvider(CLAUDE, client_for(wire), settings=ModelSettings(tool_choice="none"))

    list(provider.stream(request(*_after_tools())))

    body = wire.received[0].body
    assert "toolConfig" not in body
    blocks = [b for m in body["messages"] for b in m["content"] if "cachePoint" not in b]
    assert all(set(b) == {"text"} for b in blocks)
    assert wire.invalid == []


def test_a_tool_choice_naming_no_tool_is_a_configuration_error(wire: BedrockWire) -> None:
    provider = BedrockProvider(CLAUDE, client_for(wire), settings=ModelSettings(tool_choice="nope"))

    with pytest.raises(FatalModelError, match="names no tool") as caught:
        list(provider.stream(request()))

    assert caught.value.code == "configuration"
    assert wire.received == []


def test_a_guardrail_intervention_is_its_own_stop_reason(wire: BedrockWire) -> None:
    response = ModelResponse(
        Message("assistant", (TextPart("Sorry, I cannot help with that."),)),
        "guardrail_intervened",
        Usage(4, 6),
    )
    wire.answers.append(Answer(stream_frames(response)))
    settings = ModelSettings.model_validate({"guardrail": {"identifier": "gr-1", "version": "1"}})

    out = list(BedrockProvider(CLAUDE, client_for(wire), settings=settings).stream(request()))

    assert settled(out).stop_reason == "guardrail_intervened"
    assert wire.invalid == []


# -- prompt caching (item 8) ---------------------------------------------------------------------


def _cache_points(body: dict[str, Any]) -> dict[str, int]:
    def count(blocks: list[dict[str, Any]]) -> int:
        return sum(1 for b in blocks if "cachePoint" in b)

    return {
        "system": count(body.get("system", [])),
        "tools": count(body.get("toolConfig", {}).get("tools", [])),
        "last message": count(body["messages"][-1]["content"]),
    }


@pytest.mark.parametrize(
    ("model", "settings", "points"),
    [
        (CLAUDE, ModelSettings(), {"system": 1, "tools": 1, "last message": 1}),
        (NOVA, ModelSettings(), {"system": 1, "tools": 0, "last message": 1}),
        (
            "anthropic.claude-3-haiku-20240307-v1:0",
            ModelSettings(),
            {"system": 0, "tools": 0, "last message": 0},
        ),
        (CLAUDE, ModelSettings(prompt_cache=False), {"system": 0, "tools": 0, "last message": 0}),
        (
            "mistral.mistral-large-2407-v1:0",
            ModelSettings(prompt_cache=True),
            {"system": 1, "tools": 0, "last message": 1},
        ),
    ],
)
def test_cache_points_go_where_the_family_supports_them_and_are_configurable(
    wire: BedrockWire, model: str, settings: ModelSettings, points: dict[str, int]
) -> None:
    wire.answers.append(text_answer())

    list(BedrockProvider(model, client_for(wire), settings=settings).stream(request()))

    assert _cache_points(wire.received[0].body) == points
    assert wire.invalid == []


def test_cache_reads_and_writes_show_in_usage(wire: BedrockWire) -> None:
    wire.answers.append(
        text_answer(input_tokens=12, output_tokens=3, cache_read_tokens=1800, cache_write_tokens=40)
    )

    out = list(BedrockProvider(CLAUDE, client_for(wire)).stream(request()))

    assert settled(out).usage == Usage(12, 3, cache_read_tokens=1800, cache_write_tokens=40)


# -- reasoning (item 9) --------------------------------------------------------------------------


def test_reasoning_streams_as_its_own_events_and_signed_blocks_go_back_next_round(
    wire: BedrockWire,
) -> None:
    thought = ReasoningPart("The user wants a lookup; call the tool.", signature="c2lnbmVk")
    hidden = ReasoningPart(redacted="ZW5jcnlwdGVk")
    call = ToolCallPart("tu1", "lookup", "{}")
    first = ModelResponse(Message("assistant", (thought, hidden, call)), "tool_use", Usage(9, 9))
    wire.answers += [Answer(stream_frames(first)), text_answer("found nothing")]
    provider = BedrockProvider(
        CLAUDE, client_for(wire), settings=ModelSettings(reasoning_budget=1024, max_tokens=4096)
    )

    out = list(provider.stream(request()))

    reasoning = [e for e in out if isinstance(e, ReasoningDelta)]
    assert "".join(e.text for e in reasoning) == thought.text
    assert [e.signature for e in reasoning if e.signature] == ["c2lnbmVk"]
    message = settled(out).message
    assert message.parts == (thought, hidden, call)
    assert message.text == ""  # reasoning is never the reply
    body = wire.received[0].body
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 1024}
    }

    result = Message("tool", (ToolResultPart("tu1", "lookup", "nothing"),))
    list(provider.stream(request(request().messages[0], message, result)))

    sent = reasoning_blocks(wire.received[1].body)
    assert sent[0] == {"reasoningText": {"text": thought.text, "signature": "c2lnbmVk"}}
    assert decoded(sent[1]["redactedContent"]) == b"encrypted"
    assert wire.invalid == []


def test_reasoning_budget_on_a_model_without_a_mapping_is_a_configuration_error(
    wire: BedrockWire,
) -> None:
    provider = BedrockProvider(NOVA, client_for(wire), settings=ModelSettings(reasoning_budget=64))

    with pytest.raises(FatalModelError, match="reasoning_budget") as caught:
        list(provider.stream(request()))

    assert caught.value.code == "configuration"


# -- Converse fallback (item 11), missing usage --------------------------------------------------


def test_a_model_that_cannot_stream_tool_use_falls_back_to_converse_and_stays_there(
    wire: BedrockWire,
) -> None:
    wire.responder = _scripted_answer
    provider = BedrockProvider(LLAMA4, client_for(wire))
    session = WireSession(provider)

    result = session.turn('call calculator {"expression": "6*7"}\nthen\ncall echo {"text": "x"}')

    assert result.status == "completed", result.error
    operations = [r.operation for r in wire.received]
    # Round 1 is refused once, then every round with tools goes straight to Converse.
    assert operations == ["ConverseStream", "Converse", "Converse", "Converse"]
    assert wire.invalid == []


def test_a_stream_without_metadata_settles_with_estimated_usage(wire: BedrockWire) -> None:
    frames = [
        event("messageStart", {"role": "assistant"}),
        event("contentBlockDelta", {"delta": {"text": "hello there"}, "contentBlockIndex": 0}),
        event("messageStop", {"stopReason": "end_turn"}),
    ]
    wire.answers.append(Answer(frames))

    out = list(BedrockProvider(CLAUDE, client_for(wire)).stream(request()))

    usage = settled(out).usage
    assert usage.estimated
    assert usage.input_tokens > 0
    assert usage.output_tokens == 3  # "hello there": 11 characters / 4, rounded up


# -- a whole turn --------------------------------------------------------------------------------


def test_a_whole_turn_with_tool_rounds_runs_through_the_bedrock_wire_server(
    wire: BedrockWire, capsys: pytest.CaptureFixture[str]
) -> None:
    rounds = 0

    def respond(received: Received) -> Answer:
        # Claude with extended thinking: each answer opens with a signed reasoning block, and
        # from round 2 on reads 1,500 tokens of the cached prefix.
        nonlocal rounds
        rounds += 1
        response = ScriptedProvider().complete(neutral_request(received.body))
        thought = ReasoningPart(f"round {rounds}: follow the script", signature=f"sig-{rounds}")
        usage = Usage(
            response.usage.input_tokens,
            response.usage.output_tokens,
            cache_read_tokens=1500 if rounds > 1 else 0,
            cache_write_tokens=1500 if rounds == 1 else 0,
        )
        message = Message("assistant", (thought, *response.message.parts))
        return Answer(stream_frames(ModelResponse(message, response.stop_reason, usage)))

    wire.responder = respond
    provider = provider_from_config(
        f"bedrock:{CLAUDE}?reasoning_budget=1024&max_tokens=4096", bedrock_client=client_for(wire)
    )
    session = WireSession(provider)

    result = session.turn(SCRIPT)

    assert result.status == "completed", result.error
    assert result.rounds == 3
    assert wire.invalid == []
    # Each round sends every earlier signed reasoning block back.
    signatures = [
        [b["reasoningText"]["signature"] for b in reasoning_blocks(r.body)] for r in wire.received
    ]
    assert signatures == [[], ["sig-1"], ["sig-1", "sig-2"]]
    assistant = [m for m, _ in session.entries() if m.role == "assistant"]
    assert all(isinstance(m.parts[0], ReasoningPart) for m in assistant)
    assert [len(m.tool_calls) for m in assistant] == [2, 1, 0]
    assert "follow the script" not in assistant[-1].text  # the reply carries no reasoning
    assert result.usage.cache_read_tokens == 3000
    with capsys.disabled():
        print(
            f"\nbedrock wire turn: {describe(result)}; requests: "
            f"{[r.operation for r in wire.received]}; reply: {assistant[-1].text!r}"
        )
