"""Reasoning is its own kind end to end: a transcript part that round-trips through storage, a
frame delta (`r`) that replays, a `reasoning` delta in the API's events view kept out of the
frame's text, and nothing the chat printer shows."""

from __future__ import annotations

import io
import uuid

from turnkeep.cli.printer import StreamPrinter
from turnkeep.events import frame_event
from turnkeep.harness.context import message_tokens
from turnkeep.harness.progress import FrameWriter, read_frames
from turnkeep.harness.state import frames_address, op_address
from turnkeep.harness.transcript import message_from_json, message_to_json
from turnkeep.providers.base import (
    Message,
    ModelResponse,
    ReasoningDelta,
    ReasoningPart,
    ResponseDone,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolCallStart,
    Usage,
)
from turnkeep.storage import Storage, open_storage, set_value

THOUGHT = ReasoningPart("Weigh the options.", signature="c2ln")
HIDDEN = ReasoningPart(redacted="ZW5j")


def test_a_reasoning_part_round_trips_through_the_stored_transcript() -> None:
    message = Message(
        "assistant", (THOUGHT, HIDDEN, TextPart("Done."), ToolCallPart("c", "t", "{}"))
    )

    stored = message_to_json(message)

    assert stored["parts"][0] == {  # type: ignore[index]
        "kind": "reasoning",
        "text": "Weigh the options.",
        "signature": "c2ln",
        "redacted": "",
    }
    assert message_from_json(stored) == message
    assert message.text == "Done."


def _streamed_with_reasoning() -> tuple[FrameWriter, Storage]:
    storage = open_storage(f"memory://{uuid.uuid4().hex}", "s1")
    storage.commit([set_value(op_address("op"), {"op_id": "op"})])
    # max_bytes=1: every delta is its own frame, so the round is replayable from frames.
    writer = FrameWriter(storage, "op", "op:r0", lambda: 0.0, interval_s=60, max_bytes=1)
    for event in (
        ReasoningDelta(0, "Weigh "),
        ReasoningDelta(0, "the options."),
        ReasoningDelta(0, signature="c2ln"),
        ReasoningDelta(1, redacted="ZW5j"),
        TextDelta("Done."),
        ToolCallStart(0, "c", "t"),
        ToolCallDelta(0, "{}"),
    ):
        writer.add(event)
    message = Message(
        "assistant", (THOUGHT, HIDDEN, TextPart("Done."), ToolCallPart("c", "t", "{}"))
    )
    writer.finish(ModelResponse(message, "tool_use", Usage(7, 5, estimated=True)))
    return writer, storage


def test_reasoning_frames_replay_into_the_settled_message_with_their_signature() -> None:
    _, storage = _streamed_with_reasoning()

    replay = read_frames(storage, "op", "op:r0")

    assert replay is not None
    assert replay.response is not None
    assert replay.response.message.parts == (
        THOUGHT,
        HIDDEN,
        TextPart("Done."),
        ToolCallPart("c", "t", "{}"),
    )
    assert replay.response.usage == Usage(7, 5, estimated=True)


def test_the_events_view_shows_reasoning_as_its_own_delta_outside_the_frame_text() -> None:
    _, storage = _streamed_with_reasoning()
    elements = storage.read_list(frames_address("op", "op:r0"))

    events = [frame_event(element, "op:r0", 0) for element in elements]

    reasoning = [d.text for e in events for d in e.deltas if d.type == "reasoning"]
    assert "".join(t or "" for t in reasoning) == "Weigh the options."
    assert "".join(e.text or "" for e in events) == "Done."


def test_the_chat_printer_does_not_show_reasoning() -> None:
    out = io.StringIO()
    printer = StreamPrinter(out)

    printer.on_event(ReasoningDelta(0, "secret musing"))
    printer.on_event(TextDelta("Hello."))
    printer.on_event(
        ResponseDone(
            ModelResponse(Message("assistant", (THOUGHT, TextPart("Hello."))), "end_turn", Usage())
        )
    )

    assert "musing" not in out.getvalue()
    assert "Hello." in out.getvalue()


def test_reasoning_sent_back_counts_in_the_context_estimate() -> None:
    plain = Message("assistant", (TextPart("Done."),))
    thinking = Message("assistant", (ReasoningPart("x" * 400, signature="s"), TextPart("Done.")))

    assert message_tokens(thinking) == message_tokens(plain) + 100
