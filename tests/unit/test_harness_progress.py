"""Frames coalescing, replay from frames, fencing of progress writes."""

from __future__ import annotations

import uuid

import pytest

from turnkeep.harness.errors import FencedWriteError
from turnkeep.harness.progress import FrameWriter, ToolProgress, fenced_commit, read_frames
from turnkeep.harness.state import END_TAG, frames_address, op_address, op_scope
from turnkeep.providers.base import (
    Message,
    ModelResponse,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolCallStart,
    Usage,
)
from turnkeep.storage import Storage, append_list, open_storage, set_value, value


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _running(op: str = "op") -> Storage:
    storage = open_storage(f"memory://{uuid.uuid4().hex}", "s1")
    storage.commit([set_value(op_address(op), {"op_id": op})])
    return storage


def _stream_words(writer: FrameWriter, words: int) -> str:
    text = []
    for i in range(words):
        piece = f"word{i} "
        text.append(piece)
        writer.add(TextDelta(piece))
    writer.finish(
        ModelResponse(Message("assistant", (TextPart("".join(text)),)), "end_turn", Usage(3, 4))
    )
    return "".join(text)


@pytest.mark.parametrize("words", [10, 100, 300])
def test_a_reply_streamed_within_one_interval_writes_no_frame(words: int) -> None:
    # Nobody saw it streaming: the round settlement records it (docs/harness.md, "Frames").
    storage = _running()
    writer = FrameWriter(storage, "op", "op:r0", Clock(), interval_s=0.05, max_bytes=1 << 20)

    _stream_words(writer, words)

    assert writer.stats.commits == 0
    assert writer.stats.deltas == words
    assert storage.read_list(frames_address("op", "op:r0")) == []


def test_a_reply_that_wrote_a_frame_ends_with_an_end_tagged_frame() -> None:
    storage = _running()
    writer = FrameWriter(storage, "op", "op:r0", Clock(), interval_s=0.05, max_bytes=8)

    _stream_words(writer, 3)

    elements = storage.read_list(frames_address("op", "op:r0"))
    assert writer.stats.commits == len(elements) >= 2
    assert elements[-1].tag == END_TAG


def test_frames_flush_when_the_buffer_reaches_the_size_limit() -> None:
    storage = _running()
    writer = FrameWriter(storage, "op", "op:r0", Clock(), interval_s=60, max_bytes=100)

    text = _stream_words(writer, 100)  # ~700 bytes

    elements = storage.read_list(frames_address("op", "op:r0"))
    assert len(text.encode()) // 100 <= writer.stats.commits <= len(text.encode()) // 100 + 1
    assert len(elements) == writer.stats.commits
    assert [e.tag for e in elements][-1] == END_TAG
    assert all(e.tag is None for e in elements[:-1])


def test_frames_flush_when_the_interval_passed() -> None:
    storage = _running()
    clock = Clock()
    writer = FrameWriter(storage, "op", "op:r0", clock, interval_s=0.05, max_bytes=1 << 20)

    writer.add(TextDelta("a"))
    clock.now += 0.01
    writer.add(TextDelta("b"))
    clock.now += 0.05
    writer.add(TextDelta("c"))

    elements = storage.read_list(frames_address("op", "op:r0"))
    assert [e.value for e in elements] == [{"d": [{"k": "t", "x": "abc"}], "o": 0}]


def test_a_complete_response_is_rebuilt_from_its_frames() -> None:
    storage = _running()
    writer = FrameWriter(storage, "op", "op:r1", Clock(), interval_s=0, max_bytes=1)
    message = Message(
        "assistant",
        (TextPart("let me check"), ToolCallPart("c1", "echo", '{"text": "hi"}')),
    )
    for event in (
        TextDelta("let me "),
        TextDelta("check"),
        ToolCallStart(0, "c1", "echo"),
        ToolCallDelta(0, '{"text": '),
        ToolCallDelta(0, '"hi"}'),
    ):
        writer.add(event)
    writer.finish(ModelResponse(message, "tool_use", Usage(10, 5), "m1"), wrap_up=True)

    replay = read_frames(storage, "op", "op:r1")

    assert replay is not None
    assert replay.response == ModelResponse(message, "tool_use", Usage(10, 5), "m1")
    assert replay.wrap_up


def test_a_partial_stream_keeps_its_text_and_drops_unfinished_tool_calls() -> None:
    storage = _running()
    writer = FrameWriter(storage, "op", "op:r0", Clock(), interval_s=0, max_bytes=1)
    writer.add(TextDelta("partial "))
    writer.add(ToolCallStart(0, "c1", "echo"))
    writer.add(ToolCallDelta(0, '{"te'))

    replay = read_frames(storage, "op", "op:r0")

    assert replay is not None
    assert replay.response is None
    assert replay.message == Message("assistant", (TextPart("partial "),))


def test_no_frames_reads_as_none() -> None:
    assert read_frames(_running(), "op", "op:r0") is None


def test_every_progress_write_is_refused_once_the_operation_state_is_gone() -> None:
    storage = open_storage(f"memory://{uuid.uuid4().hex}", "s1")  # no operation state
    writer = FrameWriter(storage, "op", "op:r0", Clock(), interval_s=0, max_bytes=1)

    with pytest.raises(FencedWriteError):
        writer.add(TextDelta("late"))
    with pytest.raises(FencedWriteError):
        ToolProgress(storage, "op", "c1").save_checkpoint({"n": 1})
    with pytest.raises(FencedWriteError):
        fenced_commit(storage, "op", [set_value(value("x", "", op_scope("op")), 1)])

    assert storage.read_list(frames_address("op", "op:r0")) == []
    assert storage.scan_values("x", "", op_scope("op")) == []


def test_tool_checkpoints_and_memos_live_in_the_operation_scope() -> None:
    storage = _running()
    progress = ToolProgress(storage, "op", "c1")

    progress.save_checkpoint({"done": 3})
    progress.save_memo("etag-1")

    assert progress.checkpoint() == {"done": 3}
    assert progress.memo() == "etag-1"
    assert storage.get_value(value("tool.checkpoint", "c1")) is None  # not session-scoped
    assert len(storage.scan_values("tool.checkpoint", "", op_scope("op"))) == 1


def test_an_end_frame_whose_stop_reason_does_not_read_back_replays_as_a_partial_response() -> None:
    storage = _running()
    address = frames_address("op", "op:r0")
    fenced_commit(storage, "op", [append_list(address, {"d": [{"k": "t", "x": "Hello "}]})])
    fenced_commit(
        storage,
        "op",
        [
            append_list(
                address,
                {"d": [{"k": "t", "x": "world"}], "end": {"stop": "exploded", "usage": [1, 2]}},
                END_TAG,
            )
        ],
    )

    replay = read_frames(storage, "op", "op:r0")

    assert replay is not None
    assert replay.response is None  # never a response with a stop reason no provider gives
    assert replay.message.text == "Hello "


def test_frames_written_by_the_frame_writer_read_back_as_the_whole_response() -> None:
    storage = _running()
    writer = FrameWriter(storage, "op", "op:r0", Clock(), interval_s=0, max_bytes=1)
    writer.add(ToolCallStart(0, "c1", "echo"))
    writer.add(ToolCallDelta(0, '{"text":'))
    writer.add(ToolCallDelta(0, ' "x"}'))
    message = Message("assistant", (ToolCallPart("c1", "echo", '{"text": "x"}'),))
    writer.finish(ModelResponse(message, "tool_use", Usage(3, 4), "m1"), wrap_up=True)

    replay = read_frames(storage, "op", "op:r0")

    assert replay is not None
    assert replay.response == ModelResponse(message, "tool_use", Usage(3, 4), "m1")
    assert replay.wrap_up


def test_each_frame_records_the_characters_of_text_before_it_as_its_offset() -> None:
    storage = _running()
    writer = FrameWriter(storage, "op", "op:r0", Clock(), interval_s=0, max_bytes=1 << 20)

    writer.add(TextDelta("héllo "))
    writer.add(ToolCallStart(0, "c1", "echo"))
    writer.add(TextDelta("wörld"))

    elements = storage.read_list(frames_address("op", "op:r0"))
    assert [e.value["o"] for e in elements if isinstance(e.value, dict)] == [0, 6, 6]
