"""Message entries <-> provider messages."""

from __future__ import annotations

import pytest

from turnkeep.harness.transcript import (
    TranscriptDataError,
    entry_data,
    message_from_json,
    message_to_json,
    model_view,
)
from turnkeep.providers.base import Message, TextPart, ToolCallPart, ToolResultPart


def test_messages_round_trip_through_their_json_form() -> None:
    message = Message(
        "assistant",
        (TextPart("hi"), ToolCallPart("c1", "echo", '{"text": "é"}')),
    )
    result = Message("tool", (ToolResultPart("c1", "echo", "é", is_error=True),))

    assert message_from_json(message_to_json(message)) == message
    assert message_from_json(message_to_json(result)) == result


def test_entry_data_holds_the_message_and_metadata() -> None:
    data = entry_data(Message("user", (TextPart("x"),)), op="op", round=-1)

    assert data == {
        "message": {"role": "user", "parts": [{"kind": "text", "text": "x"}]},
        "op": "op",
        "round": -1,
    }


def test_model_view_merges_consecutive_messages_of_one_role() -> None:
    interrupted = Message("assistant", (TextPart("par"),))
    retry = Message("assistant", (TextPart("full"),))
    r1 = Message("tool", (ToolResultPart("a", "t", "1"),))
    r2 = Message("tool", (ToolResultPart("b", "t", "2"),))

    view = model_view([Message("user", (TextPart("q"),)), interrupted, retry, r1, r2])

    assert [m.role for m in view] == ["user", "assistant", "tool"]
    assert view[1].parts == (TextPart("par"), TextPart("full"))
    assert view[2].parts == r1.parts + r2.parts


@pytest.mark.parametrize(
    "bad",
    [None, {"role": "system", "parts": []}, {"role": "user"}, {"role": "user", "parts": [{}]}],
)
def test_malformed_stored_messages_raise_a_clear_error(bad: object) -> None:
    with pytest.raises(TranscriptDataError):
        message_from_json(bad)
