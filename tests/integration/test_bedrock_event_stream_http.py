"""BedrockProvider with a real botocore client against a local server speaking the wire protocol.

The unit tests use Stubber, which never runs botocore's HTTP layer or event-stream parser. Here a
`bedrock-runtime` client is pointed (`endpoint_url`) at a ThreadingHTTPServer on 127.0.0.1 that
answers ConverseStream with AWS event-stream binary frames (prelude, string headers, JSON
payload, CRC32s) in a chunked HTTP/1.1 body — so botocore parses real frames, raises in-stream
exceptions the way it really does, and a dropped connection surfaces as the urllib3 error it
really is.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import boto3
import pytest
from botocore.config import Config

from tests.support.bedrock_wire import Answer, BedrockWire, event, exception_event
from turnkeep.providers.base import (
    FatalModelError,
    Message,
    ModelRequest,
    ResponseDone,
    RetryableModelError,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallPart,
    ToolSpec,
    Usage,
)
from turnkeep.providers.bedrock import BedrockProvider

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
TOOL = ToolSpec("lookup", "Look something up.", {"type": "object", "properties": {}})


@pytest.fixture
def wire() -> Iterator[BedrockWire]:
    with BedrockWire() as running:
        yield running


@pytest.fixture
def provider(wire: BedrockWire) -> BedrockProvider:
    client = boto3.client(
        "bedrock-runtime",
        endpoint_url=wire.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )
    return BedrockProvider(MODEL, client)


def request() -> ModelRequest:
    return ModelRequest("sys", (Message("user", (TextPart("hi"),)),), (TOOL,))


def opening() -> list[bytes]:
    return [
        event("messageStart", {"role": "assistant"}),
        event("contentBlockDelta", {"delta": {"text": "Let me "}, "contentBlockIndex": 0}),
        event("contentBlockDelta", {"delta": {"text": "look."}, "contentBlockIndex": 0}),
        event("contentBlockStop", {"contentBlockIndex": 0}),
    ]


def test_real_event_stream_frames_are_parsed_into_text_and_a_reassembled_tool_call(
    wire: BedrockWire, provider: BedrockProvider
) -> None:
    arguments = '{"topic": "event streams", "depth": 2}'
    start = {"toolUse": {"toolUseId": "tooluse_1", "name": "lookup"}}
    wire.answers.append(
        Answer(
            [
                *opening(),
                event("contentBlockStart", {"start": start, "contentBlockIndex": 1}),
                *(
                    event(
                        "contentBlockDelta",
                        {
                            "delta": {"toolUse": {"input": arguments[i : i + 4]}},
                            "contentBlockIndex": 1,
                        },
                    )
                    for i in range(0, len(arguments), 4)
                ),
                event("contentBlockStop", {"contentBlockIndex": 1}),
                event("messageStop", {"stopReason": "tool_use"}),
                event(
                    "metadata",
                    {
                        "usage": {
                            "inputTokens": 30,
                            "outputTokens": 12,
                            "totalTokens": 42,
                            "cacheReadInputTokens": 100,
                        },
                        "metrics": {"latencyMs": 5},
                    },
                ),
            ]
        )
    )

    out = list(provider.stream(request()))

    assert wire.paths == [f"/model/{quote(MODEL, safe='')}/converse-stream"]
    assert wire.bodies[0]["toolConfig"]["tools"][0]["toolSpec"]["name"] == "lookup"
    assert out[:2] == [TextDelta("Let me "), TextDelta("look.")]
    done = out[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.message == Message(
        "assistant", (TextPart("Let me look."), ToolCallPart("tooluse_1", "lookup", arguments))
    )
    assert done.response.stop_reason == "tool_use"
    assert done.response.usage == Usage(30, 12, cache_read_tokens=100)


def test_connection_dropped_mid_frame_is_retryable(
    wire: BedrockWire, provider: BedrockProvider
) -> None:
    wire.answers.append(Answer(opening(), drop_after=2))

    received: list[StreamEvent] = []
    with pytest.raises(RetryableModelError) as caught:
        received.extend(provider.stream(request()))

    assert caught.value.code == "connection"
    assert received == [TextDelta("Let me ")]


@pytest.mark.parametrize(
    ("name", "kind"),
    [("throttlingException", "throttled"), ("modelStreamErrorException", "stream_error")],
)
def test_exception_frame_inside_the_stream_is_retryable(
    wire: BedrockWire, provider: BedrockProvider, name: str, kind: str
) -> None:
    wire.answers.append(Answer([*opening()[:2], exception_event(name, "try again soon")]))

    with pytest.raises(RetryableModelError, match="try again soon") as caught:
        list(provider.stream(request()))

    assert caught.value.code == kind


def test_http_429_throttling_is_retryable_and_not_retried_by_the_sdk(
    wire: BedrockWire, provider: BedrockProvider
) -> None:
    wire.answers.append(
        Answer(status=429, error_type="ThrottlingException", error_message="Too many requests")
    )

    with pytest.raises(RetryableModelError, match="Too many requests") as caught:
        list(provider.stream(request()))

    assert caught.value.code == "throttled"
    assert len(wire.paths) == 1


def test_http_400_input_too_long_is_a_fatal_context_length_error(
    wire: BedrockWire, provider: BedrockProvider
) -> None:
    wire.answers.append(
        Answer(
            status=400,
            error_type="ValidationException",
            error_message="Input is too long for requested model.",
        )
    )

    with pytest.raises(FatalModelError, match="Input is too long") as caught:
        list(provider.stream(request()))

    assert caught.value.code == "context_length"
