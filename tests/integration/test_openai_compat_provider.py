"""OpenAICompatProvider against a real HTTP server on 127.0.0.1 speaking Chat Completions SSE."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from pydantic import BaseModel

from tests.support.openai_server import (
    ChatServer,
    Reply,
    chunk,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)
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
    ToolSpec,
    TranscriptError,
    Usage,
)
from turnkeep.providers.openai_compat import TOOL_ERROR_PREFIX, OpenAICompatProvider, sse_data


class SearchArgs(BaseModel):
    query: str
    limit: int = 5


SEARCH = ToolSpec("search", "Search the docs.", SearchArgs.model_json_schema())
CLOCK = ToolSpec("clock", "What time is it.", {"type": "object", "properties": {}})


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as running:
        yield running


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    # One client for the module: building an httpx.Client loads a TLS context each time.
    with httpx.Client() as client:
        yield client


@pytest.fixture
def provider(server: ChatServer, http: httpx.Client) -> OpenAICompatProvider:
    return OpenAICompatProvider(server.base_url, "test-model", client=http, timeout=5)


def user(text: str) -> Message:
    return Message("user", (TextPart(text),))


def run(provider: OpenAICompatProvider, request: ModelRequest) -> list[StreamEvent]:
    return list(provider.stream(request))


def test_streamed_text_settles_with_stop_reason_and_usage_from_the_final_chunk(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    server.queue(
        Reply(
            [
                *text_chunks("Hel", "lo ", "there."),
                chunk({}, "stop"),
                usage_chunk(prompt=40, completion=3, cached=32),
                "[DONE]",
            ]
        )
    )

    out = run(provider, ModelRequest("be kind", (user("hi"),)))

    assert out[:3] == [TextDelta("Hel"), TextDelta("lo "), TextDelta("there.")]
    done = out[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.message == Message("assistant", (TextPart("Hello there."),))
    assert done.response.stop_reason == "end_turn"
    assert done.response.usage == Usage(input_tokens=8, output_tokens=3, cache_read_tokens=32)
    assert done.response.model == "test-model"
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["model"] == "test-model"
    assert body["messages"] == [
        {"role": "system", "content": "be kind"},
        {"role": "user", "content": "hi"},
    ]
    assert "tools" not in body


def test_parallel_tool_calls_streamed_by_index_are_reassembled(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    first = tool_call_chunks(0, "call_a", "search", ['{"qu', 'ery": "ret', 'ries"}'])
    second = tool_call_chunks(1, "call_b", "clock", ["{", "}"])
    # Interleave the two calls' deltas, as servers may.
    interleaved = [first[0], second[0], first[1], second[1], first[2], second[2], first[3]]
    server.queue(
        Reply(
            [
                *text_chunks("Looking."),
                *interleaved,
                chunk({}, "tool_calls"),
                usage_chunk(50, 20),
                "[DONE]",
            ]
        )
    )

    out = run(provider, ModelRequest("", (user("find retries"),), (SEARCH, CLOCK)))

    starts = [e for e in out if isinstance(e, ToolCallStart)]
    assert starts == [ToolCallStart(0, "call_a", "search"), ToolCallStart(1, "call_b", "clock")]
    by_index = {
        i: "".join(e.arguments for e in out if isinstance(e, ToolCallDelta) and e.index == i)
        for i in (0, 1)
    }
    assert by_index == {0: '{"query": "retries"}', 1: "{}"}
    done = out[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.message == Message(
        "assistant",
        (
            TextPart("Looking."),
            ToolCallPart("call_a", "search", '{"query": "retries"}'),
            ToolCallPart("call_b", "clock", "{}"),
        ),
    )
    assert done.response.stop_reason == "tool_use"
    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "search",
                "description": "Search the docs.",
                "parameters": SearchArgs.model_json_schema(),
            },
        },
        {
            "type": "function",
            "function": {
                "name": "clock",
                "description": "What time is it.",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]


def test_whole_tool_calls_without_index_are_separate_calls(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    # Ollama-style: each call arrives complete in one delta, without `index`.
    calls = [
        {"id": "c1", "function": {"name": "search", "arguments": {"query": "a"}}},
        {"id": "c2", "function": {"name": "search", "arguments": '{"query": "b"}'}},
    ]
    server.queue(Reply([chunk({"tool_calls": calls}), chunk({}, "stop"), "[DONE]"]))

    done = run(provider, ModelRequest("", (user("x"),), (SEARCH,)))[-1]

    assert isinstance(done, ResponseDone)
    assert done.response.message.tool_calls == (
        ToolCallPart("c1", "search", '{"query": "a"}'),
        ToolCallPart("c2", "search", '{"query": "b"}'),
    )
    # "stop" with tool calls present still means the harness must run them.
    assert done.response.stop_reason == "tool_use"


def test_interleaved_deltas_without_index_are_matched_to_their_call_by_id(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    def delta(call_id: str, **function: str) -> dict[str, object]:
        return chunk({"tool_calls": [{"id": call_id, "function": function}]})

    server.queue(
        Reply(
            [
                delta("c1", name="search", arguments='{"query": '),
                delta("c2", name="clock", arguments="{"),
                delta("c1", arguments='"a"}'),
                delta("c2", arguments="}"),
                chunk({}, "tool_calls"),
                "[DONE]",
            ]
        )
    )

    done = run(provider, ModelRequest("", (user("x"),), (SEARCH, CLOCK)))[-1]

    assert isinstance(done, ResponseDone)
    assert done.response.message.tool_calls == (
        ToolCallPart("c1", "search", '{"query": "a"}'),
        ToolCallPart("c2", "clock", "{}"),
    )


def test_invalid_tool_argument_json_reaches_the_harness_as_raw_text(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    server.queue(
        Reply(
            [
                *tool_call_chunks(0, "c1", "search", ['{"query": ', "oops"]),
                chunk({}, "tool_calls"),
                "[DONE]",
            ]
        )
    )

    done = run(provider, ModelRequest("", (user("x"),), (SEARCH,)))[-1]

    assert isinstance(done, ResponseDone)
    assert done.response.message.tool_calls == (ToolCallPart("c1", "search", '{"query": oops'),)


def test_transcript_maps_to_assistant_tool_calls_and_one_tool_message_per_result(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    transcript = (
        user("search twice"),
        Message(
            "assistant",
            (
                ToolCallPart("c1", "search", '{"query": "a"}'),
                ToolCallPart("c2", "search", '{"query": '),
            ),
        ),
        Message(
            "tool",
            (
                ToolResultPart("c1", "search", "found a"),
                ToolResultPart("c2", "search", "arguments are not valid JSON", is_error=True),
            ),
        ),
    )
    server.queue(Reply([*text_chunks("done"), chunk({}, "stop"), "[DONE]"]))

    run(provider, ModelRequest("sys", transcript, (SEARCH,), max_tokens=64, temperature=0.0))

    body = server.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "search twice"},
        {
            # Tool calls only: no `content` key (llama-cpp-python refuses `"content": null`).
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"query": "a"}'},
                },
                {
                    # Not a JSON object: sent as {} (the error result tells the model why).
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "search", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "found a"},
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": TOOL_ERROR_PREFIX + "arguments are not valid JSON",
        },
    ]
    assert body["max_tokens"] == 64
    assert body["temperature"] == 0.0


def test_stored_tool_arguments_that_are_not_a_json_object_are_sent_so_strict_servers_accept_them(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    # The test server parses tool-call arguments like Ollama and vLLM do (400 otherwise).
    garbage = ['{"query": "a', "[1, 2]", "null", "plain words"]
    calls = tuple(ToolCallPart(f"c{i}", "search", text) for i, text in enumerate(garbage))
    transcript = (
        user("search"),
        Message("assistant", (*calls, ToolCallPart("ok", "search", '{"query": "b"}'))),
        Message(
            "tool",
            (
                *(
                    ToolResultPart(c.id, "search", "arguments invalid", is_error=True)
                    for c in calls
                ),
                ToolResultPart("ok", "search", "found b"),
            ),
        ),
    )
    server.queue(Reply([*text_chunks("sorry"), chunk({}, "stop"), "[DONE]"]))

    done = run(provider, ModelRequest("", transcript, (SEARCH,)))[-1]

    assert isinstance(done, ResponseDone)
    sent = server.requests[0].body["messages"][1]["tool_calls"]
    assert [c["function"]["arguments"] for c in sent] == ["{}"] * 4 + ['{"query": "b"}']


def test_connection_dropped_mid_stream_is_retryable(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    events: list[dict[str, object] | str] = [
        *text_chunks("one ", "two ", "three"),
        chunk({}, "stop"),
        "[DONE]",
    ]
    server.queue(Reply(events, drop_after=2))

    received: list[StreamEvent] = []
    with pytest.raises(RetryableModelError) as caught:
        received.extend(provider.stream(ModelRequest("", (user("count"),))))

    assert caught.value.code == "connection"
    assert received == [TextDelta("one ")]


@pytest.mark.parametrize(
    ("events", "missing"),
    [
        ([*text_chunks("cut"), "[DONE]"], "a finish reason"),
        ([*text_chunks("cut"), chunk({}, "stop")], r"\[DONE\]"),
    ],
)
def test_stream_that_ends_cleanly_without_finish_reason_or_done_is_retryable(
    server: ChatServer,
    provider: OpenAICompatProvider,
    events: list[dict[str, object] | str],
    missing: str,
) -> None:
    server.queue(Reply(events))

    with pytest.raises(RetryableModelError, match=missing) as caught:
        run(provider, ModelRequest("", (user("x"),)))

    assert caught.value.code == "stream_truncated"


@pytest.mark.parametrize(
    ("status", "kind"), [(429, "throttled"), (500, "unavailable"), (503, "unavailable")]
)
def test_throttling_and_server_errors_are_retryable_with_the_server_message(
    server: ChatServer, provider: OpenAICompatProvider, status: int, kind: str
) -> None:
    message = f"status {status}: try again later"
    server.queue(Reply(status=status, json_body={"error": {"message": message, "type": "x"}}))

    with pytest.raises(RetryableModelError) as caught:
        run(provider, ModelRequest("", (user("x"),)))

    assert caught.value.code == kind
    assert message in str(caught.value)


def test_429_for_an_exhausted_quota_is_fatal_because_retrying_cannot_help(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    message = "You exceeded your current quota, please check your plan and billing details."
    error = {"message": message, "type": "insufficient_quota", "code": "insufficient_quota"}
    server.queue(Reply(status=429, json_body={"error": error}))

    with pytest.raises(FatalModelError, match="exceeded your current quota") as caught:
        run(provider, ModelRequest("", (user("x"),)))

    assert caught.value.code == "quota"


def test_context_length_400_is_fatal_with_the_server_message(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    message = "This model's maximum context length is 8192 tokens. However, you requested 9000."
    server.queue(
        Reply(
            status=400,
            json_body={
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
        )
    )

    with pytest.raises(FatalModelError) as caught:
        run(provider, ModelRequest("", (user("x"),)))

    assert caught.value.code == "context_length"
    assert message in str(caught.value)
    assert not caught.value.retryable


@pytest.mark.parametrize(
    ("status", "kind"), [(400, "invalid_request"), (401, "auth"), (403, "auth"), (404, "not_found")]
)
def test_client_errors_are_fatal(
    server: ChatServer, provider: OpenAICompatProvider, status: int, kind: str
) -> None:
    server.queue(Reply(status=status, json_body={"error": "model 'nope' not found"}))

    with pytest.raises(FatalModelError) as caught:
        run(provider, ModelRequest("", (user("x"),)))

    assert caught.value.code == kind
    assert "model 'nope' not found" in str(caught.value)


def test_error_object_inside_the_stream_is_retryable(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    server.queue(
        Reply([*text_chunks("par"), {"error": {"message": "worker crashed", "code": 500}}])
    )

    with pytest.raises(RetryableModelError, match="worker crashed"):
        run(provider, ModelRequest("", (user("x"),)))


def test_error_object_inside_the_stream_with_a_4xx_status_code_is_fatal(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    # vLLM's in-stream error: the HTTP status travels as the integer `code`.
    error = {"message": "invalid grammar", "type": "BadRequestError", "param": None, "code": 400}
    server.queue(Reply([*text_chunks("par"), {"error": error}]))

    with pytest.raises(FatalModelError, match="invalid grammar") as caught:
        run(provider, ModelRequest("", (user("x"),)))

    assert caught.value.code == "invalid_request"


def test_read_timeout_is_retryable(server: ChatServer) -> None:
    server.queue(Reply(hang=True))
    slow = OpenAICompatProvider(server.base_url, "test-model", timeout=0.3)

    with pytest.raises(RetryableModelError) as caught:
        run(slow, ModelRequest("", (user("x"),)))

    assert caught.value.code == "timeout"


def test_refused_connection_is_retryable() -> None:
    with ChatServer() as stopped:
        url = stopped.base_url
    closed = OpenAICompatProvider(url, "m", timeout=2)

    with pytest.raises(RetryableModelError) as caught:
        run(closed, ModelRequest("", (user("x"),)))

    assert caught.value.code == "connection"


def test_unanswered_tool_call_is_never_sent(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    transcript = (
        user("x"),
        Message("assistant", (ToolCallPart("c1", "search", "{}"),)),
        user("y"),
    )

    with pytest.raises(TranscriptError, match="c1"):
        run(provider, ModelRequest("", transcript, (SEARCH,)))

    assert server.requests == []


def test_api_key_is_sent_as_bearer_token(server: ChatServer) -> None:
    server.queue(Reply([*text_chunks("ok"), chunk({}, "stop"), "[DONE]"]))
    keyed = OpenAICompatProvider(server.base_url, "test-model", api_key="sk-test-123")

    run(keyed, ModelRequest("", (user("x"),)))

    assert server.requests[0].headers["authorization"] == "Bearer sk-test-123"


def test_streaming_off_parses_the_json_completion(server: ChatServer) -> None:
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Searching.",
                    "tool_calls": [
                        {
                            "id": "c9",
                            "type": "function",
                            "function": {"name": "search", "arguments": '{"query": "z"}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 6, "total_tokens": 17},
    }
    server.queue(Reply(json_body=completion))
    plain = OpenAICompatProvider(server.base_url, "test-model", stream=False)

    out = run(plain, ModelRequest("", (user("x"),), (SEARCH,)))

    assert out[:3] == [
        TextDelta("Searching."),
        ToolCallStart(0, "c9", "search"),
        ToolCallDelta(0, '{"query": "z"}'),
    ]
    done = out[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.stop_reason == "tool_use"
    assert done.response.usage == Usage(11, 6)
    body = server.requests[0].body
    assert body["stream"] is False
    assert "stream_options" not in body


def test_streaming_off_completion_with_object_arguments_settles_them_as_json_text(
    server: ChatServer,
) -> None:
    call = {"id": "c1", "function": {"name": "search", "arguments": {"query": "z", "limit": 2}}}
    message = {"role": "assistant", "content": "", "tool_calls": [call]}
    completion = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    server.queue(Reply(json_body=completion))
    plain = OpenAICompatProvider(server.base_url, "test-model", stream=False)

    done = run(plain, ModelRequest("", (user("x"),), (SEARCH,)))[-1]

    assert isinstance(done, ResponseDone)
    (settled,) = done.response.message.tool_calls
    assert json.loads(settled.arguments) == {"query": "z", "limit": 2}


def test_sse_parser_joins_multi_line_data_and_skips_comments() -> None:
    lines = [": keep-alive", 'data: {"a":', "data: 1}", "", "event: ping", "data: [DONE]"]

    assert list(sse_data(lines)) == ['{"a":\n1}', "[DONE]"]
    assert json.loads(next(sse_data(lines))) == {"a": 1}


@pytest.mark.parametrize("url", ["localhost:11434/v1", "ftp://x/v1", ""])
def test_base_url_must_be_absolute_http(url: str) -> None:
    with pytest.raises(ValueError, match="base url"):
        OpenAICompatProvider(url, "m")


def test_tool_call_whose_name_arrives_after_its_first_arguments_keeps_every_piece(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    server.queue(
        Reply(
            [
                chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": '{"q'}}]}),
                chunk({"tool_calls": [{"index": 0, "function": {"name": "search"}}]}),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'uery": "x"}'}}]}),
                chunk({"tool_calls": [{"index": 1, "id": "c2", "function": {"arguments": "{}"}}]}),
                chunk({}, "tool_calls"),
                "[DONE]",
            ]
        )
    )

    out = run(provider, ModelRequest("", (user("x"),), (SEARCH,)))

    assert out[0] == ToolCallStart(0, "c1", "search")
    done = out[-1]
    assert isinstance(done, ResponseDone)
    # The second call never got a name: it still settles, and the harness answers it with an
    # unknown-tool error the model sees.
    assert done.response.message.tool_calls == (
        ToolCallPart("c1", "search", '{"query": "x"}'),
        ToolCallPart("c2", "", "{}"),
    )


@pytest.mark.parametrize(
    "bad", ["not json at all", '["a", "list"]', '{"choices": [{"index": 0, "delta": "text"}]}']
)
def test_malformed_stream_chunk_is_a_retryable_protocol_error(
    server: ChatServer, provider: OpenAICompatProvider, bad: str
) -> None:
    server.queue(Reply([*text_chunks("ok"), bad, chunk({}, "stop"), "[DONE]"]))

    with pytest.raises(RetryableModelError) as caught:
        run(provider, ModelRequest("", (user("x"),)))

    assert caught.value.code == "protocol_error"


def test_server_that_ignores_stream_true_and_sends_json_is_still_understood(
    server: ChatServer, provider: OpenAICompatProvider
) -> None:
    completion = {
        "model": "test-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
    }
    server.queue(Reply(json_body=completion))

    out = run(provider, ModelRequest("", (user("x"),)))

    assert out[0] == TextDelta("hi")
    done = out[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.stop_reason == "end_turn"
