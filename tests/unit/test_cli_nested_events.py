"""`chat --url`'s renderer with a sub-agent's nested events: a child event's seq is its own
session's, so it never hides a later event of the parent's, each child tool call and result is
one indented line, and the resume cursor holds both places (docs/api.md, "Sub-agent events")."""

from __future__ import annotations

import io

from turnkeep.cli.event_renderer import TurnEventRenderer
from turnkeep.cli.printer import StreamPrinter

CHILD = {
    "call_id": "c1",
    "agent": "writer",
    "session_id": "sub-" + "a" * 40,
    "op_id": "op-sub-" + "b" * 24,
    "depth": 1,
}


def _entry(seq: int, role: str, parts: list[dict[str, object]], nested: bool) -> dict[str, object]:
    event: dict[str, object] = {"seq": seq, "kind": "entry", "role": role, "parts": parts}
    if nested:
        event["nested"] = [CHILD]
    return event


def test_a_child_event_with_a_higher_seq_does_not_hide_the_parents_later_result() -> None:
    out = io.StringIO()
    renderer = TurnEventRenderer(StreamPrinter(out))
    call = {"kind": "tool_call", "id": "c1", "name": "writer", "arguments": "{}"}
    child_call = {"kind": "tool_call", "id": "x", "name": "shout", "arguments": '{"text": "hi"}'}
    child_result = {"kind": "tool_result", "call_id": "x", "name": "shout", "content": "HI"}
    result = {"kind": "tool_result", "call_id": "c1", "name": "writer", "content": "HI"}

    for event in (
        _entry(8, "assistant", [call], nested=False),
        _entry(20, "assistant", [child_call], nested=True),
        _entry(26, "tool", [child_result], nested=True),
        _entry(16, "tool", [result], nested=False),
        _entry(26, "tool", [child_result], nested=True),  # a repeat: shown once
    ):
        renderer.on_event(event)

    lines = out.getvalue().splitlines()
    assert lines.count('    [writer] call shout {"text": "hi"}') == 1
    assert lines.count("    [writer] shout returned: HI") == 1
    assert any("<- writer [ok] HI" in line for line in lines)
    assert renderer.resume_cursor() == "16:" + "b" * 24 + "=26"
