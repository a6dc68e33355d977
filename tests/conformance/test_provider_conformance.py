"""The model-provider conformance suite: every provider under tests/conformance/providers/
streams, makes and reads back tool calls, reports usage and fails with the same error codes
(docs/providers.md). The scripted model answers behind every wire, so the same user text asks
each provider for the same reply."""

from __future__ import annotations

import json
import threading

import pytest

from tests.conformance.providers import FAILURES, Failure, ProviderHarness
from turnkeep.providers.base import (
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
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
    Usage,
)

ECHO = ToolSpec(
    "echo",
    "Echo a text.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)
LONG = "tell me everything about the deployment of release two point four " * 4


def ask(text: str, *history: Message, tools: tuple[ToolSpec, ...] = (ECHO,)) -> ModelRequest:
    return ModelRequest("You are terse.", (*history, Message("user", (TextPart(text),))), tools)


def drain(harness: ProviderHarness, request: ModelRequest) -> list[StreamEvent]:
    return list(harness.provider.stream(request))


def settled(events: list[StreamEvent]) -> ModelResponse:
    done = events[-1]
    assert isinstance(done, ResponseDone), f"the last event is {done!r}, not ResponseDone"
    assert sum(isinstance(e, ResponseDone) for e in events) == 1
    return done.response


# -- every provider -------------------------------------------------------------------------------


def test_a_reply_streams_in_several_deltas_that_add_up_to_the_settled_text(
    provider: ProviderHarness,
) -> None:
    events = drain(provider, ask(LONG))

    response = settled(events)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1
    assert "".join(deltas) == response.message.text
    assert response.message.text == f"You said: {LONG}"
    assert response.message.role == "assistant"
    assert response.stop_reason == "end_turn"


def test_a_tool_call_streams_as_start_and_argument_pieces_and_settles_as_raw_json(
    provider: ProviderHarness,
) -> None:
    events = drain(provider, ask('call echo {"text": "hello wire"}'))

    response = settled(events)
    assert response.stop_reason == "tool_use"
    (call,) = response.message.tool_calls
    assert call.name == "echo"
    assert json.loads(call.arguments) == {"text": "hello wire"}
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.id, s.name) for s in starts] == [(0, call.id, "echo")]
    pieces = "".join(e.arguments for e in events if isinstance(e, ToolCallDelta))
    assert json.loads(pieces) == {"text": "hello wire"}


def test_parallel_tool_calls_keep_their_order_and_distinct_ids(provider: ProviderHarness) -> None:
    response = settled(drain(provider, ask('call echo {"text": "a"}\ncall echo {"text": "b"}')))

    calls = response.message.tool_calls
    assert [json.loads(c.arguments)["text"] for c in calls] == ["a", "b"]
    assert len({c.id for c in calls}) == 2


def test_a_tool_result_goes_back_to_the_model_and_its_reply_reads_it(
    provider: ProviderHarness,
) -> None:
    first = settled(drain(provider, ask('call echo {"text": "ping"}')))
    (call,) = first.message.tool_calls
    results = Message(
        "tool",
        (ToolResultPart(call.id, "echo", "pong"),),
    )
    history = (Message("user", (TextPart('call echo {"text": "ping"}'),)), first.message, results)

    second = settled(drain(provider, ModelRequest("You are terse.", history, (ECHO,))))

    assert second.stop_reason == "end_turn"
    assert second.message.text == "Tool echo returned: pong"


def test_an_error_result_reaches_the_model_as_an_error(provider: ProviderHarness) -> None:
    first = settled(drain(provider, ask('call echo {"text": "ping"}')))
    (call,) = first.message.tool_calls
    results = Message("tool", (ToolResultPart(call.id, "echo", "echo is down", is_error=True),))
    history = (Message("user", (TextPart('call echo {"text": "ping"}'),)), first.message, results)

    second = settled(drain(provider, ModelRequest("You are terse.", history, (ECHO,))))

    assert second.message.text == "Tool echo failed: echo is down"


def test_every_round_reports_measured_usage(provider: ProviderHarness) -> None:
    usage = settled(drain(provider, ask(LONG))).usage

    assert usage.input_tokens > 0
    assert usage.output_tokens > 0
    assert not usage.estimated


def test_complete_returns_what_the_stream_settles(provider: ProviderHarness) -> None:
    response = provider.provider.complete(ask("just this"))

    assert response.message.text == "You said: just this"


# -- providers with a wire ------------------------------------------------------------------------


def test_the_transcript_arrives_on_the_wire_as_it_was_sent(wire_provider: ProviderHarness) -> None:
    assert wire_provider.wire is not None
    call = ToolCallPart("call-1", "echo", '{"text": "x"}')
    history = (
        Message("user", (TextPart('call echo {"text": "x"}'),)),
        Message("assistant", (call,)),
        Message(
            "tool",
            (ToolResultPart("call-1", "echo", "x back"),),
        ),
        Message("assistant", (TextPart("Tool echo returned: x back"),)),
    )
    request = ask("and now?", *history)

    settled(drain(wire_provider, request))

    (seen,) = wire_provider.wire.received()
    assert seen.system == request.system
    assert [t.name for t in seen.tools] == ["echo"]
    assert [m.role for m in seen.messages] == [m.role for m in request.messages]
    sent_call = seen.messages[1].tool_calls[0]
    assert (sent_call.id, sent_call.name) == ("call-1", "echo")
    assert json.loads(sent_call.arguments) == {"text": "x"}
    (sent_result,) = seen.messages[2].parts
    assert isinstance(sent_result, ToolResultPart)
    assert (sent_result.call_id, sent_result.content, sent_result.is_error) == (
        "call-1",
        "x back",
        False,
    )
    assert seen.messages[-1].text == "and now?"


def test_usage_is_what_the_server_reported(wire_provider: ProviderHarness) -> None:
    assert wire_provider.wire is not None
    wire_provider.wire.report_next(Usage(1234, 56))

    usage = settled(drain(wire_provider, ask("count me"))).usage

    assert (usage.input_tokens, usage.output_tokens, usage.estimated) == (1234, 56, False)


# What each failure must become on every provider: (retryable, the codes allowed).
EXPECTED: dict[Failure, tuple[bool, set[str]]] = {
    "throttled": (True, {"throttled"}),
    "unavailable": (True, {"unavailable"}),
    "auth": (False, {"auth"}),
    "context_overflow": (False, {"context_length"}),
    "dropped": (True, {"connection", "stream_truncated", "protocol_error"}),
}


@pytest.mark.parametrize("failure", FAILURES)
def test_a_server_failure_becomes_the_same_error_code_on_every_provider(
    wire_provider: ProviderHarness, failure: Failure
) -> None:
    assert wire_provider.wire is not None
    wire_provider.wire.fail_next(failure)

    with pytest.raises(ModelError) as raised:
        drain(wire_provider, ask(LONG))

    retryable, codes = EXPECTED[failure]
    assert raised.value.retryable is retryable
    assert isinstance(raised.value, RetryableModelError) is retryable
    assert raised.value.code in codes, f"{failure} became {raised.value.code!r}: {raised.value}"
    assert str(raised.value)  # a message a person can read


def test_every_failure_kind_has_a_stated_outcome() -> None:
    assert set(EXPECTED) == set(FAILURES)


def test_the_provider_works_again_after_a_failure(wire_provider: ProviderHarness) -> None:
    assert wire_provider.wire is not None
    wire_provider.wire.fail_next("dropped")
    with pytest.raises(RetryableModelError):
        drain(wire_provider, ask(LONG))

    assert settled(drain(wire_provider, ask("again"))).message.text == "You said: again"


def test_an_abandoned_stream_is_closed_on_the_wire_and_the_next_round_works(
    wire_provider: ProviderHarness,
) -> None:
    """A cancelled round stops reading mid-reply: the connection must be released, not read
    to its end (the server sees the client go before it sent everything)."""
    assert wire_provider.wire is not None
    wire_provider.wire.pace_next(0.05)
    stream = wire_provider.provider.stream(ask(LONG * 8))
    first = next(e for e in stream if isinstance(e, TextDelta))
    assert first.text

    closer = threading.Thread(target=stream.close)
    closer.start()
    closer.join(timeout=10)

    assert not closer.is_alive(), "closing the stream waited for the rest of the reply"
    assert wire_provider.wire.client_gone(10.0), "the server never saw the client go"
    assert settled(drain(wire_provider, ask("next"))).message.text == "You said: next"
