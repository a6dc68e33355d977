"""Message entries <-> provider messages."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from turnkeep.harness.transcript import (
    TranscriptCache,
    TranscriptDataError,
    branch_messages,
    entry_data,
    message_from_json,
    message_to_json,
    model_view,
)
from turnkeep.providers.base import Message, TextPart, ToolCallPart, ToolResultPart
from turnkeep.storage import Entry, Storage, insert_entry, open_storage


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


class _ScanCounter:
    """Delegates to a Storage; counts the entries `scan_entries` returns; can hide one once."""

    def __init__(self, inner: Storage, hide_once: str | None = None) -> None:
        self._inner = inner
        self.returned = 0
        self._hide = hide_once

    def scan_entries(self, **kwargs: Any) -> list[Entry]:
        entries = self._inner.scan_entries(**kwargs)
        if self._hide is not None:
            entries = [e for e in entries if e.id != self._hide]
            self._hide = None
        self.returned += len(entries)
        return entries

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _say(storage: Storage, entry_id: str, parent: str | None, text: str) -> None:
    role = "user" if entry_id.startswith("u") else "assistant"
    storage.commit(
        [insert_entry(entry_id, parent, "message", entry_data(Message(role, (TextPart(text),))))]
    )


def test_the_cache_reads_only_entries_committed_since_its_last_read() -> None:
    storage = open_storage(f"memory://{uuid.uuid4().hex}", "s1")
    counter = _ScanCounter(storage)
    cache = TranscriptCache()
    parent = None
    for i in range(50):
        _say(storage, f"u{i}", parent, f"q{i}")
        _say(storage, f"a{i}", f"u{i}", f"r{i}")
        parent = f"a{i}"
    first = cache.branch_messages(counter, "a49")  # type: ignore[arg-type]
    _say(storage, "u50", "a49", "q50")

    second = cache.branch_messages(counter, "u50")  # type: ignore[arg-type]

    assert counter.returned == 100 + 1
    assert second == [*first, Message("user", (TextPart("q50"),))]
    assert second == branch_messages(storage, "u50")


def test_an_ancestor_the_incremental_read_missed_triggers_a_full_read() -> None:
    storage = open_storage(f"memory://{uuid.uuid4().hex}", "s1")
    _say(storage, "u0", None, "q0")
    _say(storage, "a0", "u0", "r0")
    _say(storage, "u1", "a0", "q1")
    cache = TranscriptCache()
    # The first read misses "a0" (as if it became visible after a later entry).
    cache.branch_messages(_ScanCounter(storage, hide_once="a0"), "u0")  # type: ignore[arg-type]

    messages = cache.branch_messages(storage, "u1")

    assert [m.text for m in messages] == ["q0", "r0", "q1"]


def test_a_head_that_is_not_stored_is_a_clear_error() -> None:
    storage = open_storage(f"memory://{uuid.uuid4().hex}", "s1")
    _say(storage, "u0", None, "q0")

    with pytest.raises(TranscriptDataError, match="'nope'"):
        TranscriptCache().branch_messages(storage, "nope")


def test_an_attachment_part_is_stored_as_a_reference_without_its_bytes() -> None:
    from turnkeep.harness.transcript import message_from_json, message_to_json
    from turnkeep.providers.base import AttachmentPart, Message, TextPart, ToolResultPart

    shot = AttachmentPart("att-1", "shot.png", "image/png", 4, data=b"\x89PNG")
    message = Message(
        "user",
        (TextPart("look"), shot, ToolResultPart("c1", "grab", "ok", attachments=(shot,))),
    )
    stored = message_to_json(message)
    assert b"PNG" not in repr(stored).encode()
    back = message_from_json(stored)
    assert back.parts[1] == AttachmentPart("att-1", "shot.png", "image/png", 4)
    result = back.parts[2]
    assert isinstance(result, ToolResultPart)
    assert result.attachments == (AttachmentPart("att-1", "shot.png", "image/png", 4),)
