"""The stream client's parts: reading Server-Sent Events, and the renderer's offset rule."""

from __future__ import annotations

from turnkeep.cli.event_renderer import TurnEventRenderer
from turnkeep.cli.sse import SseEvent, read_sse


class Printed:
    def __init__(self) -> None:
        self.out = ""

    def text(self, piece: str) -> None:
        self.out += piece

    def end_text(self) -> None:
        self.out += "|"

    def tool_call(self, name: str, arguments: str) -> None:
        self.out += f"<call {name}>"

    def tool_result(self, name: str, content: str, is_error: bool) -> None:
        self.out += f"<result {name}>"

    def notice(self, line: str) -> None:
        self.out += f"[{line}]"


def test_events_are_read_with_their_name_id_and_json_data_and_comments_are_skipped() -> None:
    lines = [
        "event: status",
        'data: {"status": "running"}',
        "",
        ": ping",
        "",
        "event: frame",
        "id: 7",
        'data: {"seq": 7, "text": "a"}',
        "",
        "event: delta",
        'data: {"offset": 1, "text": "b"}',
        "",
    ]
    assert list(read_sse(lines)) == [
        SseEvent("status", None, {"status": "running"}),
        SseEvent("frame", 7, {"seq": 7, "text": "a"}),
        SseEvent("delta", None, {"offset": 1, "text": "b"}),
    ]


def test_deltas_and_frames_print_each_character_once_whatever_overlaps_or_repeats() -> None:
    printed = Printed()
    renderer = TurnEventRenderer(printed)
    rid = "op-1:r0"
    renderer.on_delta({"response_id": rid, "offset": 0, "text": "Hello "})
    renderer.on_delta({"response_id": rid, "offset": 6, "text": "wor"})
    # A frame persisted earlier, read after the deltas: it overlaps, nothing is printed twice.
    renderer.on_event({"seq": 3, "kind": "frame", "response_id": rid, "offset": 0, "text": "Hel"})
    renderer.on_delta({"response_id": rid, "offset": 6, "text": "wor"})  # a resend
    renderer.on_delta({"response_id": rid, "offset": 0, "text": "Hello world"})  # a resync
    renderer.on_event(
        {
            "seq": 4,
            "kind": "entry",
            "role": "assistant",
            "response_id": rid,
            "parts": [{"kind": "text", "text": "Hello world!"}],
        }
    )
    renderer.on_delta({"response_id": rid, "offset": 11, "text": "??"})  # stale: settled

    assert printed.out == "Hello world!|"
