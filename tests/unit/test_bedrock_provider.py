"""BedrockProvider against botocore's Stubber, on the response shapes of the real service model
(see tests/support/bedrock_stub.py for how ConverseStream events are stubbed honestly)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import urllib3
from botocore.eventstream import ChecksumMismatch
from botocore.exceptions import ReadTimeoutError
from pydantic import BaseModel, Field

from tests.support.bedrock_stub import EventStreamStub, EventStreamStubber
from turnkeep.plumbing import clients as plumbing_clients
from turnkeep.providers.base import (
    FatalModelError,
    Message,
    ModelRequest,
    ResponseDone,
    RetryableModelError,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolCallStart,
    ToolResultPart,
    TranscriptError,
    Usage,
)
from turnkeep.providers.bedrock import BedrockProvider, tool_configuration
from turnkeep.tools.base import Tool, ToolResult

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"


@pytest.fixture
def client() -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture
def stubber(client: Any) -> Iterator[EventStreamStubber]:
    with EventStreamStubber(client) as stub:
        yield stub
        stub.assert_no_pending_responses()


def stream_response(
    events: list[dict[str, Any]], *, then: Exception | None = None
) -> dict[str, Any]:
    return {"stream": EventStreamStub(events, then=then)}


def text_events(*pieces: str, index: int = 0) -> list[dict[str, Any]]:
    return [
        *(
            {"contentBlockDelta": {"delta": {"text": p}, "contentBlockIndex": index}}
            for p in pieces
        ),
        {"contentBlockStop": {"contentBlockIndex": index}},
    ]


def tool_events(index: int, call_id: str, name: str, pieces: list[str]) -> list[dict[str, Any]]:
    start = {"toolUse": {"toolUseId": call_id, "name": name}}
    return [
        {"contentBlockStart": {"start": start, "contentBlockIndex": index}},
        *(
            {"contentBlockDelta": {"delta": {"toolUse": {"input": p}}, "contentBlockIndex": index}}
            for p in pieces
        ),
        {"contentBlockStop": {"contentBlockIndex": index}},
    ]


def finish(stop: str, **usage: int) -> list[dict[str, Any]]:
    tokens = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15, **usage}
    return [
        {"messageStop": {"stopReason": stop}},
        {"metadata": {"usage": tokens, "metrics": {"latencyMs": 42}}},
    ]


class LookupArgs(BaseModel):
    city: str = Field(description="City name")
    days: int = Field(default=1, ge=1, le=7)


LOOKUP = Tool(
    "weather_lookup",
    "Look up the weather.",
    LookupArgs,
    lambda args, ctx: ToolResult(f"sunny in {args.city}"),
    replay_safe=True,
)


def user(text: str) -> Message:
    return Message("user", (TextPart(text),))


def run(provider: BedrockProvider, request: ModelRequest) -> list[StreamEvent]:
    return list(provider.stream(request))


def test_streamed_tool_call_split_across_many_deltas_is_reassembled_into_one_call(
    client: Any, stubber: EventStreamStubber
) -> None:
    arguments = json.dumps({"city": "Zürich", "days": 3})
    pieces = [arguments[i : i + 3] for i in range(0, len(arguments), 3)]
    assert len(pieces) > 5
    events = [
        {"messageStart": {"role": "assistant"}},
        *text_events("Let me ", "check."),
        *tool_events(1, "tooluse_A1", "weather_lookup", pieces),
        *tool_events(2, "tooluse_B2", "weather_lookup", ['{"city": ', '"Bern"}']),
        *finish("tool_use"),
    ]
    stubber.add_response("converse_stream", stream_response(events))
    provider = BedrockProvider(MODEL, client)

    out = run(provider, ModelRequest("sys", (user("weather?"),), (LOOKUP.spec(),)))

    assert out[:2] == [TextDelta("Let me "), TextDelta("check.")]
    assert out[2] == ToolCallStart(0, "tooluse_A1", "weather_lookup")
    deltas = [e for e in out if isinstance(e, ToolCallDelta) and e.index == 0]
    assert len(deltas) == len(pieces)
    assert "".join(d.arguments for d in deltas) == arguments
    assert ToolCallStart(1, "tooluse_B2", "weather_lookup") in out
    done = out[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.message == Message(
        "assistant",
        (
            TextPart("Let me check."),
            ToolCallPart("tooluse_A1", "weather_lookup", arguments),
            ToolCallPart("tooluse_B2", "weather_lookup", '{"city": "Bern"}'),
        ),
    )
    assert done.response.stop_reason == "tool_use"
    assert done.response.model == MODEL


def test_request_maps_transcript_tool_results_and_pydantic_tool_specs_to_converse(
    client: Any, stubber: EventStreamStubber
) -> None:
    transcript = (
        user("weather in Bern and Oslo?"),
        Message(
            "assistant",
            (
                TextPart("Checking."),
                ToolCallPart("c1", "weather_lookup", '{"city": "Bern"}'),
                ToolCallPart("c2", "weather_lookup", '{"city": 7}'),
            ),
        ),
        Message(
            "tool",
            (
                ToolResultPart("c1", "weather_lookup", "sunny in Bern"),
                ToolResultPart("c2", "weather_lookup", "city: not a string", is_error=True),
            ),
        ),
        user("and tomorrow?"),
    )
    expected = {
        "modelId": MODEL,
        # Claude 3.5 Haiku caches prompts: cache points after the system prompt, the tools and
        # the last message (docs/providers.md, "Prompt caching").
        "system": [{"text": "be brief"}, {"cachePoint": {"type": "default"}}],
        "inferenceConfig": {"maxTokens": 256, "temperature": 0.2},
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "weather_lookup",
                        "description": "Look up the weather.",
                        "inputSchema": {"json": LookupArgs.model_json_schema()},
                    }
                },
                {"cachePoint": {"type": "default"}},
            ]
        },
        "messages": [
            {"role": "user", "content": [{"text": "weather in Bern and Oslo?"}]},
            {
                "role": "assistant",
                "content": [
                    {"text": "Checking."},
                    {
                        "toolUse": {
                            "toolUseId": "c1",
                            "name": "weather_lookup",
                            "input": {"city": "Bern"},
                        }
                    },
                    {
                        "toolUse": {
                            "toolUseId": "c2",
                            "name": "weather_lookup",
                            "input": {"city": 7},
                        }
                    },
                ],
            },
            {
                # The tool message and the next user message merge: Converse alternates roles.
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "c1",
                            "content": [{"text": "sunny in Bern"}],
                            "status": "success",
                        }
                    },
                    {
                        "toolResult": {
                            "toolUseId": "c2",
                            "content": [{"text": "city: not a string"}],
                            "status": "error",
                        }
                    },
                    {"text": "and tomorrow?"},
                    {"cachePoint": {"type": "default"}},
                ],
            },
        ],
    }
    stubber.add_response(
        "converse_stream",
        stream_response([*text_events("ok"), *finish("end_turn")]),
        expected_params=expected,
    )
    request = ModelRequest(
        "be brief", transcript, (LOOKUP.spec(),), max_tokens=256, temperature=0.2
    )

    done = run(BedrockProvider(MODEL, client), request)[-1]

    assert isinstance(done, ResponseDone)
    assert done.response.message == Message("assistant", (TextPart("ok"),))
    assert done.response.stop_reason == "end_turn"


def test_stored_tool_arguments_that_are_not_a_json_object_are_sent_as_empty_input(
    client: Any, stubber: EventStreamStubber
) -> None:
    transcript = (
        user("go"),
        Message(
            "assistant",
            (
                ToolCallPart("c1", "weather_lookup", '{"city": "Be'),
                ToolCallPart("c2", "weather_lookup", "[1, 2]"),
            ),
        ),
        Message(
            "tool",
            (
                ToolResultPart("c1", "weather_lookup", "arguments are not JSON", is_error=True),
                ToolResultPart("c2", "weather_lookup", "arguments must be an object", True),
            ),
        ),
    )
    provider = BedrockProvider(MODEL, client)
    arguments = provider.converse_arguments(ModelRequest("", transcript, (LOOKUP.spec(),)))
    stubber.add_response(
        "converse_stream",
        stream_response([*text_events("sorry"), *finish("end_turn")]),
        expected_params=arguments,
    )

    out = run(provider, ModelRequest("", transcript, (LOOKUP.spec(),)))

    uses = [b["toolUse"] for b in arguments["messages"][1]["content"]]
    assert [u["input"] for u in uses] == [{}, {}]
    results = [b["toolResult"] for b in arguments["messages"][2]["content"] if "toolResult" in b]
    assert [r["status"] for r in results] == ["error", "error"]
    assert results[0]["content"] == [{"text": "arguments are not JSON"}]
    assert "system" not in arguments
    assert isinstance(out[-1], ResponseDone)


def test_garbage_tool_arguments_streamed_by_the_model_reach_the_harness_raw(
    client: Any, stubber: EventStreamStubber
) -> None:
    events = [*tool_events(0, "tu1", "weather_lookup", ['{"city": ', "Bern"]), *finish("tool_use")]
    stubber.add_response("converse_stream", stream_response(events))

    done = run(BedrockProvider(MODEL, client), ModelRequest("", (user("x"),), (LOOKUP.spec(),)))[-1]

    assert isinstance(done, ResponseDone)
    assert done.response.message.tool_calls == (
        ToolCallPart("tu1", "weather_lookup", '{"city": Bern'),
    )


def test_tool_call_without_argument_deltas_settles_as_empty_object(
    client: Any, stubber: EventStreamStubber
) -> None:
    stubber.add_response(
        "converse_stream",
        stream_response([*tool_events(0, "tu1", "working_notes_get", []), *finish("tool_use")]),
    )

    done = run(BedrockProvider(MODEL, client), ModelRequest("", (user("x"),), (LOOKUP.spec(),)))[-1]

    assert isinstance(done, ResponseDone)
    assert done.response.message.tool_calls == (ToolCallPart("tu1", "working_notes_get", "{}"),)


def test_usage_reports_input_output_and_cache_tokens(
    client: Any, stubber: EventStreamStubber
) -> None:
    events = [
        *text_events("hi"),
        *finish(
            "end_turn",
            inputTokens=120,
            outputTokens=7,
            totalTokens=2127,
            cacheReadInputTokens=1500,
            cacheWriteInputTokens=500,
        ),
    ]
    stubber.add_response("converse_stream", stream_response(events))

    done = run(BedrockProvider(MODEL, client), ModelRequest("", (user("x"),)))[-1]

    assert isinstance(done, ResponseDone)
    assert done.response.usage == Usage(120, 7, 1500, 500)


def test_streaming_off_uses_converse_and_yields_the_same_events(
    client: Any, stubber: EventStreamStubber
) -> None:
    response = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"text": "Checking."},
                    {
                        "toolUse": {
                            "toolUseId": "tu9",
                            "name": "weather_lookup",
                            "input": {"city": "Oslo"},
                        }
                    },
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7},
        "metrics": {"latencyMs": 12},
    }
    stubber.add_response("converse", response)
    provider = BedrockProvider(MODEL, client, stream=False)

    out = run(provider, ModelRequest("", (user("x"),), (LOOKUP.spec(),)))

    assert out[:3] == [
        TextDelta("Checking."),
        ToolCallStart(0, "tu9", "weather_lookup"),
        ToolCallDelta(0, '{"city": "Oslo"}'),
    ]
    done = out[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.stop_reason == "tool_use"
    assert done.response.usage == Usage(3, 4)


def test_tools_off_renders_earlier_tool_blocks_as_text_without_tool_config(
    client: Any, stubber: EventStreamStubber
) -> None:
    transcript = (
        user("go"),
        Message("assistant", (ToolCallPart("c1", "weather_lookup", '{"city": "Bern"}'),)),
        Message("tool", (ToolResultPart("c1", "weather_lookup", "boom", is_error=True),)),
    )
    provider = BedrockProvider(MODEL, client)
    arguments = provider.converse_arguments(ModelRequest("wrap up", transcript))

    assert "toolConfig" not in arguments
    blocks = [b for m in arguments["messages"] for b in m["content"] if "cachePoint" not in b]
    assert all(set(b) == {"text"} for b in blocks)
    assert "weather_lookup" in blocks[1]["text"]
    assert "error" in blocks[2]["text"]
    assert "boom" in blocks[2]["text"]


def test_tool_spec_names_must_be_unique() -> None:
    with pytest.raises(FatalModelError, match="duplicate tool names"):
        tool_configuration([LOOKUP.spec(), LOOKUP.spec()])


def test_transcript_with_an_unanswered_tool_call_is_never_sent(
    client: Any, stubber: EventStreamStubber
) -> None:
    transcript = (
        user("go"),
        Message("assistant", (ToolCallPart("c1", "weather_lookup", "{}"),)),
        user("hello?"),
    )

    # No response is queued: a call reaching the client would fail with UnStubbedResponseError.
    with pytest.raises(TranscriptError, match="c1"):
        run(BedrockProvider(MODEL, client), ModelRequest("", transcript, (LOOKUP.spec(),)))


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        ("ThrottlingException", 429, "throttled"),
        ("ServiceUnavailableException", 503, "unavailable"),
        ("InternalServerException", 500, "unavailable"),
        ("ModelNotReadyException", 429, "unavailable"),
        ("ModelTimeoutException", 408, "timeout"),
    ],
)
def test_transient_service_errors_are_retryable(
    client: Any, stubber: EventStreamStubber, code: str, status: int, kind: str
) -> None:
    stubber.add_client_error(
        "converse_stream",
        service_error_code=code,
        service_message="slow down",
        http_status_code=status,
    )

    with pytest.raises(RetryableModelError) as caught:
        run(BedrockProvider(MODEL, client), ModelRequest("", (user("x"),)))

    assert caught.value.code == kind
    assert code in str(caught.value)


@pytest.mark.parametrize(
    "case",
    [
        ("ValidationException", 400, "messages.0.content: blank text", "invalid_request"),
        ("ValidationException", 400, "Input is too long for requested model.", "context_length"),
        (
            "ValidationException",
            400,
            "prompt is too long: 210000 tokens",
            "context_length",
        ),
        ("AccessDeniedException", 403, "not authorized to invoke model", "auth"),
        ("ResourceNotFoundException", 404, "model identifier is invalid", "not_found"),
    ],
)
def test_validation_auth_and_context_length_errors_are_fatal_with_the_service_message(
    client: Any, stubber: EventStreamStubber, case: tuple[str, int, str, str]
) -> None:
    code, status, message, kind = case
    stubber.add_client_error(
        "converse", service_error_code=code, service_message=message, http_status_code=status
    )

    with pytest.raises(FatalModelError) as caught:
        run(BedrockProvider(MODEL, client, stream=False), ModelRequest("", (user("x"),)))

    assert caught.value.code == kind
    assert message in str(caught.value)
    assert not caught.value.retryable


@pytest.mark.parametrize("event", ["throttlingException", "modelStreamErrorException"])
def test_exception_event_inside_the_stream_is_retryable(
    client: Any, stubber: EventStreamStubber, event: str
) -> None:
    stub = EventStreamStub([*text_events("part"), {event: {"message": "mid-stream trouble"}}])
    stubber.add_response("converse_stream", {"stream": stub})

    out: list[StreamEvent] = []
    with pytest.raises(RetryableModelError, match="mid-stream trouble"):
        out.extend(BedrockProvider(MODEL, client).stream(ModelRequest("", (user("x"),))))

    assert out == [TextDelta("part")]
    assert stub.closed


def test_validation_event_inside_the_stream_is_fatal(
    client: Any, stubber: EventStreamStubber
) -> None:
    stub = EventStreamStub([{"validationException": {"message": "Input is too long"}}])
    stubber.add_response("converse_stream", {"stream": stub})

    with pytest.raises(FatalModelError) as caught:
        run(BedrockProvider(MODEL, client), ModelRequest("", (user("x"),)))

    assert caught.value.code == "context_length"


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        # botocore's EventStream reads the raw urllib3 response: these are what it raises.
        (urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead"), "connection"),
        (
            urllib3.exceptions.ReadTimeoutError(None, "/converse-stream", "Read timed out."),
            "timeout",
        ),
        (ChecksumMismatch(1234, 5678), "protocol_error"),
    ],
)
def test_connection_dropped_timed_out_or_corrupted_mid_stream_is_retryable(
    client: Any, stubber: EventStreamStubber, failure: Exception, kind: str
) -> None:
    stubber.add_response(
        "converse_stream", stream_response(text_events("half an ans"), then=failure)
    )

    with pytest.raises(RetryableModelError) as caught:
        run(BedrockProvider(MODEL, client), ModelRequest("", (user("x"),)))

    assert caught.value.code == kind


def test_stream_that_ends_without_message_stop_is_retryable(
    client: Any, stubber: EventStreamStubber
) -> None:
    stubber.add_response("converse_stream", stream_response(text_events("cut")))

    with pytest.raises(RetryableModelError) as caught:
        run(BedrockProvider(MODEL, client), ModelRequest("", (user("x"),)))

    assert caught.value.code == "stream_truncated"


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("guardrail_intervened", "guardrail_intervened"),
        ("content_filtered", "content_filtered"),
        ("max_tokens", "max_tokens"),
        ("model_context_window_exceeded", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
    ],
)
def test_stop_reasons_map_to_the_neutral_ones(
    client: Any, stubber: EventStreamStubber, stop: str, expected: str
) -> None:
    stubber.add_response("converse_stream", stream_response([*text_events("x"), *finish(stop)]))

    done = run(BedrockProvider(MODEL, client), ModelRequest("", (user("x"),)))[-1]

    assert isinstance(done, ResponseDone)
    assert done.response.stop_reason == expected


def test_malformed_model_output_is_retryable(client: Any, stubber: EventStreamStubber) -> None:
    stubber.add_response(
        "converse_stream", stream_response([*text_events("x"), *finish("malformed_model_output")])
    )

    with pytest.raises(RetryableModelError, match="malformed_model_output"):
        run(BedrockProvider(MODEL, client), ModelRequest("", (user("x"),)))


def test_default_client_is_shared_makes_one_attempt_and_leaves_retries_to_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # A private cache: the hook registered below must not reach other tests' default clients.
    monkeypatch.setattr(plumbing_clients, "_CLIENTS", {})
    provider = BedrockProvider(MODEL, region_name="us-east-1")
    assert BedrockProvider("other-model", region_name="us-east-1").client is provider.client
    attempts: list[str] = []

    def time_out(**kwargs: Any) -> None:
        attempts.append(kwargs["request"].url)
        raise ReadTimeoutError(endpoint_url=kwargs["request"].url)

    provider.client.meta.events.register("before-send.bedrock-runtime.ConverseStream", time_out)

    with pytest.raises(RetryableModelError) as caught:
        run(provider, ModelRequest("", (user("x"),)))

    assert caught.value.code == "timeout"
    assert len(attempts) == 1


def test_model_id_must_be_non_empty() -> None:
    with pytest.raises(ValueError, match="model id"):
        BedrockProvider("")


def test_malformed_tool_use_with_streamed_calls_reaches_the_harness_as_tool_use(
    client: Any, stubber: EventStreamStubber
) -> None:
    events = [*tool_events(0, "tu1", "weather_lookup", ['{"city"']), *finish("malformed_tool_use")]
    stubber.add_response("converse_stream", stream_response(events))

    done = run(BedrockProvider(MODEL, client), ModelRequest("", (user("x"),), (LOOKUP.spec(),)))[-1]

    assert isinstance(done, ResponseDone)
    assert done.response.stop_reason == "tool_use"
    assert done.response.message.tool_calls == (ToolCallPart("tu1", "weather_lookup", '{"city"'),)


def test_tool_block_started_twice_is_a_retryable_protocol_error(
    client: Any, stubber: EventStreamStubber
) -> None:
    events = [
        *tool_events(0, "tu1", "weather_lookup", ["{}"]),
        *tool_events(0, "tu2", "weather_lookup", ["{}"]),
        *finish("tool_use"),
    ]
    stubber.add_response("converse_stream", stream_response(events))

    with pytest.raises(RetryableModelError) as caught:
        run(BedrockProvider(MODEL, client), ModelRequest("", (user("x"),), (LOOKUP.spec(),)))

    assert caught.value.code == "protocol_error"
