"""OpenAICompatProvider on the wire against a real HTTP server on 127.0.0.1 that behaves like the
servers seen in issue #22:

- llama-cpp-python's server validates every message with pydantic and answers `"content": null`
  with HTTP 500 ("7 validation errors ... Input should be a valid string"), and ignores
  `stream_options`, so its streams carry no usage;
- llama.cpp's `llama-server` answers a prompt over its context with HTTP 400
  `{"error": {"code": 400, "message": "request (N tokens) exceeds the available context size
  (M tokens), try increasing it", "type": "exceed_context_size_error", ...}}` (the error type
  added in ggml-org/llama.cpp#15780).

The model behind the server is the scripted one, computing each answer from the request as it
arrived on the wire.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.openai_server import (
    ChatServer,
    Reply,
    chunk,
    neutral_request,
    sse_reply,
    text_chunks,
    usage_chunk,
)
from tests.support.wire_turns import WireSession
from turnkeep.cli.printer import describe
from turnkeep.providers.base import (
    FatalModelError,
    Message,
    ModelRequest,
    ReasoningDelta,
    ReasoningPart,
    ResponseDone,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnkeep.providers.compaction import is_compaction_request
from turnkeep.providers.factory import provider_from_config
from turnkeep.providers.openai_compat import OpenAICompatProvider
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.providers.settings import ModelSettings

SEARCH = ToolSpec("search", "Search.", {"type": "object", "properties": {}})
SCRIPT = (
    'call calculator {"expression": "6*7"}\n'
    'call echo {"text": "first round"}\n'
    "then\n"
    'call echo {"text": "second round"}\n'
)
NULL_CONTENT_500 = {
    "error": {
        "message": "7 validation errors for ChatCompletionRequestAssistantMessage\n"
        "content\n  Input should be a valid string [type=string_type, input_value=None]",
        "type": "internal_server_error",
    }
}
OVERFLOW_400 = {
    "error": {
        "code": 400,
        "message": "request (18038 tokens) exceeds the available context size (8192 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 18038,
        "n_ctx": 8192,
    }
}


def refuses_null_content(body: dict[str, Any]) -> Reply | None:
    """llama-cpp-python: a message whose `content` is null fails its request model (HTTP 500)."""
    if any("content" in m and m["content"] is None for m in body["messages"]):
        return Reply(status=500, json_body=NULL_CONTENT_500)
    return None


def scripted(body: dict[str, Any], *, with_usage: bool = True) -> Reply:
    events = list(ScriptedProvider().stream(neutral_request(body)))
    return sse_reply(events, with_usage=with_usage)


class LlamaCppPython:
    """The server's behaviour: null content refused with 500, no usage in the stream."""

    def __init__(self) -> None:
        self.statuses: list[int] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        reply = refuses_null_content(body) or scripted(body, with_usage=False)
        self.statuses.append(reply.status)
        return reply


@pytest.fixture
def llama_cpp_python() -> Iterator[tuple[ChatServer, LlamaCppPython]]:
    behaviour = LlamaCppPython()
    with ChatServer(responder=behaviour) as server:
        yield server, behaviour


def test_a_whole_turn_with_tool_rounds_runs_against_a_llama_cpp_python_like_server(
    llama_cpp_python: tuple[ChatServer, LlamaCppPython], capsys: pytest.CaptureFixture[str]
) -> None:
    server, behaviour = llama_cpp_python
    session = WireSession(OpenAICompatProvider(server.base_url, "qwen2.5-0.5b", timeout=10))

    result = session.turn(SCRIPT)

    assert result.status == "completed", result.error
    assert behaviour.statuses == [200, 200, 200]  # no null content, so no 500
    assistant = [m for m, _ in session.entries() if m.role == "assistant"]
    assert [len(m.tool_calls) for m in assistant] == [2, 1, 0]
    sent = server.requests[1].body["messages"]
    tool_calls_only = [m for m in sent if m["role"] == "assistant"]
    assert all("content" not in m for m in tool_calls_only)
    # No usage in the stream: estimated, marked so, never a silent zero.
    assert result.usage.estimated
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0
    line = describe(result)
    assert "(estimated)" in line
    assert "~" in line
    with capsys.disabled():
        print(f"\nllama-cpp-python-like wire turn: {line}; reply: {assistant[-1].text!r}")


def test_estimated_usage_does_not_calibrate_the_context_budget(
    llama_cpp_python: tuple[ChatServer, LlamaCppPython],
) -> None:
    server, _ = llama_cpp_python
    session = WireSession(OpenAICompatProvider(server.base_url, "qwen2.5-0.5b", timeout=10))

    assert session.turn("hello").status == "completed"

    contexts = [d.get("context") for m, d in session.entries() if m.role == "assistant"]
    assert contexts
    assert all(isinstance(c, dict) and c["input_tokens"] is None for c in contexts)


def test_llama_servers_exceed_context_size_error_is_a_context_length_error() -> None:
    with ChatServer(responder=lambda body: Reply(status=400, json_body=OVERFLOW_400)) as server:
        provider = OpenAICompatProvider(server.base_url, "m", timeout=10)

        with pytest.raises(FatalModelError, match="exceeds the available context size") as caught:
            list(provider.stream(ModelRequest("", (Message("user", (TextPart("hi"),)),))))

    assert caught.value.code == "context_length"


def test_a_llama_server_context_overflow_shrinks_the_context_and_the_turn_completes() -> None:
    overflow_once = False

    def respond(body: dict[str, Any]) -> Reply:
        nonlocal overflow_once
        if overflow_once:
            overflow_once = False
            return Reply(status=400, json_body=OVERFLOW_400)
        return scripted(body)

    with ChatServer(responder=respond) as server:
        session = WireSession(OpenAICompatProvider(server.base_url, "m", timeout=10))
        assert session.turn("an earlier turn to compact").status == "completed"
        overflow_once = True

        result = session.turn("and now?")

    assert result.status == "completed", result.error
    systems = [r.body["messages"][0]["content"] for r in server.requests]
    assert any(is_compaction_request(s) for s in systems)


# -- settings on the wire ------------------------------------------------------------------------


def test_spec_options_and_request_settings_reach_the_chat_completions_body() -> None:
    with ChatServer(responder=scripted) as server:
        provider = provider_from_config(
            f"openai:{server.base_url}#m?temperature=0.2&top_p=0.5&stop=END&stop=STOP"
            '&max_tokens=300&tool_choice=search&extra={"seed":7,"top_k":20}'
        )
        request = ModelRequest(
            "sys",
            (Message("user", (TextPart("hi"),)),),
            (SEARCH,),
            settings=ModelSettings(temperature=0.9),
        )

        list(provider.stream(request))

    body = server.requests[0].body
    assert {
        k: body[k] for k in ("temperature", "top_p", "stop", "max_tokens", "seed", "top_k")
    } == {
        "temperature": 0.9,
        "top_p": 0.5,
        "stop": ["END", "STOP"],
        "max_tokens": 300,
        "seed": 7,
        "top_k": 20,
    }
    assert body["tool_choice"] == {"type": "function", "function": {"name": "search"}}


@pytest.mark.parametrize(
    ("choice", "sent"), [("auto", "auto"), ("any", "required"), ("none", "none")]
)
def test_tool_choice_maps_to_chat_completions_tool_choice(choice: str, sent: str) -> None:
    with ChatServer(responder=scripted) as server:
        provider = OpenAICompatProvider(
            server.base_url, "m", timeout=10, settings=ModelSettings(tool_choice=choice)
        )
        list(provider.stream(ModelRequest("", (Message("user", (TextPart("hi"),)),), (SEARCH,))))

    assert server.requests[0].body["tool_choice"] == sent


@pytest.mark.parametrize(
    "settings",
    [
        ModelSettings(reasoning_budget=100),
        ModelSettings.model_validate({"guardrail": {"identifier": "g", "version": "1"}}),
        ModelSettings(extra={"messages": []}),
    ],
)
def test_settings_chat_completions_cannot_carry_are_a_configuration_error(
    settings: ModelSettings,
) -> None:
    with ChatServer() as server:
        provider = OpenAICompatProvider(server.base_url, "m", timeout=10, settings=settings)

        with pytest.raises(FatalModelError) as caught:
            list(provider.stream(ModelRequest("", (Message("user", (TextPart("hi"),)),))))

    assert caught.value.code == "configuration"
    assert server.requests == []


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_content_deltas_are_reasoning_events_not_reply_text(field: str) -> None:
    events: list[dict[str, Any] | str] = [
        chunk({"role": "assistant", "content": None, field: "Think "}),
        chunk({field: "first."}),
        *text_chunks("Answer."),
        chunk({}, "stop"),
        usage_chunk(10, 4),
        "[DONE]",
    ]
    with ChatServer() as server:
        server.queue(Reply(events))
        provider = OpenAICompatProvider(server.base_url, "m", timeout=10)
        out = list(provider.stream(ModelRequest("", (Message("user", (TextPart("hi"),)),))))

    assert [e.text for e in out if isinstance(e, ReasoningDelta)] == ["Think ", "first."]
    done = out[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.message.parts == (ReasoningPart("Think first."), TextPart("Answer."))
    assert done.response.message.text == "Answer."


def test_stored_reasoning_is_not_sent_back_to_a_chat_completions_server() -> None:
    transcript = (
        Message("user", (TextPart("go"),)),
        Message("assistant", (ReasoningPart("hmm"), ToolCallPart("c1", "search", "{}"))),
        Message("tool", (ToolResultPart("c1", "search", "none"),)),
    )
    with ChatServer(responder=scripted) as server:
        provider = OpenAICompatProvider(server.base_url, "m", timeout=10)
        list(provider.stream(ModelRequest("", transcript, (SEARCH,))))

    assert "hmm" not in str(server.requests[0].body["messages"])


def test_a_stream_without_usage_settles_with_estimated_usage_not_a_silent_zero() -> None:
    with ChatServer() as server:
        server.queue(Reply([*text_chunks("hello there"), chunk({}, "stop"), "[DONE]"]))
        provider = OpenAICompatProvider(server.base_url, "m", timeout=10)
        out = list(provider.stream(ModelRequest("sys", (Message("user", (TextPart("hi"),)),))))

    done = out[-1]
    assert isinstance(done, ResponseDone)
    usage = done.response.usage
    assert usage.estimated
    assert (usage.input_tokens, usage.output_tokens) == (2, 3)  # "syshi" / 4, "hello there" / 4
