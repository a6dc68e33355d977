"""Conformance: a cold model view reads from the latest context marker on, on every backend.

The harness bounds a cold model round's reads with the session value `context.start` (the
latest marker and its first kept entry) and `scan_entries(after_seq=...)` from that entry: the
storage must return exactly the entries from there, before and after a reopen and in a fork
(where entries get new sequences).
"""

from __future__ import annotations

from typing import Any

from tests.conformance.backends import BackendHarness
from turnkeep.harness.transcript import (
    COMPACTION_ENTRY_TYPE,
    TranscriptCache,
    branch_messages,
    context_start_address,
    entry_data,
)
from turnkeep.providers.base import Message, TextPart
from turnkeep.storage import Entry, Storage, Write, fork_session, insert_entry, set_value

TURNS_BEFORE, TURNS_AFTER, FIRST_KEPT = 30, 3, 25


class _Counting:
    """Delegates to a Storage; counts the entries `scan_entries` returns."""

    def __init__(self, inner: Storage) -> None:
        self._inner = inner
        self.returned = 0

    def scan_entries(self, **kwargs: Any) -> list[Entry]:
        entries = self._inner.scan_entries(**kwargs)
        self.returned += len(entries)
        return entries

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _turn(n: int, parent: str | None) -> list[Write]:
    user = Message("user", (TextPart(f"question {n}"),))
    reply = Message("assistant", (TextPart(f"answer {n}"),))
    return [
        insert_entry(f"op{n}:user", parent, "message", entry_data(user, op=f"op{n}", round=-1)),
        insert_entry(
            f"op{n}:r0", f"op{n}:user", "message", entry_data(reply, op=f"op{n}", round=0)
        ),
    ]


def _compacted_session(storage: Storage) -> str:
    parent: str | None = None
    for n in range(TURNS_BEFORE):
        storage.commit(_turn(n, parent))
        parent = f"op{n}:r0"
    marker = {"op": "opX", "round": 0, "first_kept_id": f"op{FIRST_KEPT}:user", "summary": "S"}
    storage.commit(
        [
            insert_entry("opX:r0:compaction", parent, COMPACTION_ENTRY_TYPE, marker),
            set_value(
                context_start_address(),
                {"entry_id": "opX:r0:compaction", "first_kept_id": marker["first_kept_id"]},
            ),
        ]
    )
    parent = "opX:r0:compaction"
    for n in range(TURNS_BEFORE, TURNS_BEFORE + TURNS_AFTER):
        storage.commit(_turn(n, parent))
        parent = f"op{n}:r0"
    return parent


def _check_bounded_view(storage: Storage, head: str) -> None:
    counting = _Counting(storage)

    view = TranscriptCache().branch_view(counting, head)  # type: ignore[arg-type]

    kept_turns = TURNS_BEFORE + TURNS_AFTER - FIRST_KEPT
    assert counting.returned == 2 * kept_turns + 1  # the kept entries and the marker, no more
    assert view.marker is not None
    assert view.marker.summary == "S"
    assert [i.entry_id for i in view.items][:2] == [f"op{FIRST_KEPT}:user", f"op{FIRST_KEPT}:r0"]
    assert len(view.items) == 2 * kept_turns
    assert view.items[0].turn_start


def test_a_cold_view_reads_only_from_the_latest_markers_first_kept_entry(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    head = _compacted_session(storage)

    _check_bounded_view(storage, head)
    _check_bounded_view(backend.reopen(storage), head)


def test_the_whole_branch_stays_readable_after_a_compaction(backend: BackendHarness) -> None:
    storage = backend.open()
    head = _compacted_session(storage)

    messages = branch_messages(storage, head)

    assert len(messages) == 2 * (TURNS_BEFORE + TURNS_AFTER)
    assert messages[0].text == "question 0"


def test_a_fork_reads_its_view_from_the_same_entry_under_its_own_sequences(
    backend: BackendHarness,
) -> None:
    source = backend.open("s1")
    head = _compacted_session(source)
    # Entries of another session first, so the fork's sequences differ from the source's.
    other = backend.open("s0")
    other.commit(_turn(99, None))
    target = backend.open("s2")
    fork_session(source, target)

    first_kept = f"op{FIRST_KEPT}:user"
    assert target.get_entries([first_kept])[0].seq != source.get_entries([first_kept])[0].seq
    _check_bounded_view(target, head)
