"""Conformance: list tags, exclusive cursors, order, limits and stop_at_tag (docs/storage.md)."""

from __future__ import annotations

import pytest

from tests.conformance.backends import BackendHarness
from tests.conformance.storage_helpers import now_and_after_reopen
from turnkeep.storage import (
    DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
    Storage,
    StorageValidationError,
    ValueList,
    append_list,
    ephemeral_scope,
    value_list,
)

FRAMES = value_list("frames", "resp-1", ephemeral_scope("op-1"))


def _append_each(storage: Storage, address: ValueList, tags: list[str | None]) -> list[int]:
    """One commit per element (value = its index); returns the element sequences."""
    return [storage.commit([append_list(address, i, tag=t)]).seqs[0] for i, t in enumerate(tags)]


def test_list_tags_round_trip_as_none_or_the_string(backend: BackendHarness) -> None:
    storage = backend.open()
    storage.commit(
        [
            append_list(FRAMES, {"a": 1}),
            append_list(FRAMES, {"b": 2}, tag="checkpoint"),
            append_list(FRAMES, None, tag="é ✓ tag"),
        ]
    )
    for handle in now_and_after_reopen(backend, storage):
        page = handle.read_list(FRAMES)
        assert [(e.value, e.tag) for e in page] == [
            ({"a": 1}, None),
            ({"b": 2}, "checkpoint"),
            (None, "é ✓ tag"),
        ]


def test_session_list_tags_round_trip_after_reopen(backend: BackendHarness) -> None:
    storage = backend.open()
    events = value_list("events")
    storage.commit([append_list(events, "x", tag="t"), append_list(events, "y")])
    storage = backend.reopen(storage)
    assert [(e.value, e.tag) for e in storage.read_list(events)] == [("x", "t"), ("y", None)]


def test_cursor_is_exclusive_in_ascending_order(backend: BackendHarness) -> None:
    storage = backend.open()
    seqs = _append_each(storage, FRAMES, [None] * 5)
    page = storage.read_list(FRAMES, cursor=seqs[1])
    assert [e.seq for e in page] == seqs[2:]


def test_cursor_is_exclusive_in_descending_order(backend: BackendHarness) -> None:
    storage = backend.open()
    seqs = _append_each(storage, FRAMES, [None] * 5)
    page = storage.read_list(FRAMES, cursor=seqs[3], order="desc")
    assert [e.seq for e in page] == [seqs[2], seqs[1], seqs[0]]


def test_cursor_between_element_sequences_is_legal(backend: BackendHarness) -> None:
    storage = backend.open()
    seqs = _append_each(storage, FRAMES, [None] * 3)
    assert [e.seq for e in storage.read_list(FRAMES, cursor=0)] == seqs
    assert storage.read_list(FRAMES, cursor=seqs[-1] + 1000) == []
    assert [e.seq for e in storage.read_list(FRAMES, cursor=seqs[-1] + 1000, order="desc")] == [
        seqs[2],
        seqs[1],
        seqs[0],
    ]


def test_descending_order_starts_at_the_newest_element(backend: BackendHarness) -> None:
    storage = backend.open()
    seqs = _append_each(storage, FRAMES, [None] * 4)
    page = storage.read_list(FRAMES, order="desc", limit=2)
    assert [(e.seq, e.value) for e in page] == [(seqs[3], 3), (seqs[2], 2)]


def test_paging_with_the_last_returned_seq_visits_every_element_once(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    storage.commit([append_list(FRAMES, i) for i in range(23)])
    for order in ("asc", "desc"):
        seen: list[int] = []
        cursor: int | None = None
        for _ in range(10):  # bounded: a cursor that does not advance must fail, not hang
            page = storage.read_list(FRAMES, cursor=cursor, order=order, limit=5)
            if not page:
                break
            seen += [int(e.value) for e in page]  # type: ignore[arg-type]
            cursor = page[-1].seq
        expected = list(range(23)) if order == "asc" else list(range(22, -1, -1))
        assert seen == expected


def test_read_list_of_an_absent_list_is_empty(backend: BackendHarness) -> None:
    storage = backend.open()
    assert storage.read_list(value_list("never-written")) == []
    assert storage.read_list(FRAMES, order="desc", stop_at_tag="x") == []


def test_default_limit_is_1000_and_limits_clamp_to_10000(backend: BackendHarness) -> None:
    storage = backend.open()
    total = MAX_LIST_LIMIT + 2
    chunk = total // 3
    # A few large transactions keep this cheap on every backend.
    for start in range(0, total, chunk):
        storage.commit([append_list(FRAMES, i) for i in range(start, min(start + chunk, total))])
    assert len(storage.read_list(FRAMES)) == DEFAULT_LIST_LIMIT
    asc = storage.read_list(FRAMES, limit=MAX_LIST_LIMIT * 3)
    assert len(asc) == MAX_LIST_LIMIT
    assert (asc[0].value, asc[-1].value) == (0, MAX_LIST_LIMIT - 1)
    desc = storage.read_list(FRAMES, order="desc", limit=MAX_LIST_LIMIT + 1)
    assert len(desc) == MAX_LIST_LIMIT
    assert desc[0].value == total - 1
    rest = storage.read_list(FRAMES, cursor=asc[-1].seq, limit=MAX_LIST_LIMIT)
    assert [e.value for e in rest] == [MAX_LIST_LIMIT, MAX_LIST_LIMIT + 1]


def test_list_limit_below_one_or_not_an_int_is_rejected_naming_it(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    storage.commit([append_list(FRAMES, 1)])
    for bad in (0, -1, 1.5, "10", True):
        with pytest.raises(StorageValidationError, match="limit"):
            storage.read_list(FRAMES, limit=bad)  # type: ignore[arg-type]


def test_bad_list_read_options_are_rejected_naming_them(backend: BackendHarness) -> None:
    storage = backend.open()
    storage.commit([append_list(FRAMES, 1)])
    bad_options: list[tuple[dict[str, object], str]] = [
        ({"order": "newest"}, "order"),
        ({"cursor": -1}, "cursor"),
        ({"cursor": "5"}, "cursor"),
        ({"stop_at_tag": ""}, "stop_at_tag"),
    ]
    for kwargs, word in bad_options:
        with pytest.raises(StorageValidationError, match=word):
            storage.read_list(FRAMES, **kwargs)  # type: ignore[arg-type]


def test_stop_at_tag_ascending_includes_the_first_marker(backend: BackendHarness) -> None:
    storage = backend.open()
    seqs = _append_each(storage, FRAMES, [None, "x", None, "end", None, "end"])
    page = storage.read_list(FRAMES, stop_at_tag="end")
    assert [(e.seq, e.tag) for e in page] == [
        (seqs[0], None),
        (seqs[1], "x"),
        (seqs[2], None),
        (seqs[3], "end"),
    ]
    after = storage.read_list(FRAMES, cursor=page[-1].seq, stop_at_tag="end")
    assert [e.seq for e in after] == [seqs[4], seqs[5]]


def test_stop_at_tag_descending_includes_the_first_marker_from_the_newest(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    seqs = _append_each(storage, FRAMES, ["end", None, "end", None, None])
    page = storage.read_list(FRAMES, order="desc", stop_at_tag="end")
    assert [e.seq for e in page] == [seqs[4], seqs[3], seqs[2]]
    assert page[-1].tag == "end"


def test_stop_at_tag_without_a_marker_returns_the_whole_page(backend: BackendHarness) -> None:
    storage = backend.open()
    seqs = _append_each(storage, FRAMES, [None, "x", None])
    assert [e.seq for e in storage.read_list(FRAMES, stop_at_tag="end")] == seqs


def test_stop_at_tag_never_searches_beyond_the_page_limit(backend: BackendHarness) -> None:
    storage = backend.open()
    seqs = _append_each(storage, FRAMES, [None, None, None, None, "end", None])
    first = storage.read_list(FRAMES, limit=3, stop_at_tag="end")
    assert [e.seq for e in first] == seqs[:3]
    second = storage.read_list(FRAMES, cursor=first[-1].seq, limit=3, stop_at_tag="end")
    assert [e.seq for e in second] == seqs[3:5]
    desc = storage.read_list(FRAMES, order="desc", limit=1, stop_at_tag="end")
    assert [e.seq for e in desc] == [seqs[5]]


def test_stop_at_tag_on_the_first_inspected_element_returns_just_it(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    seqs = _append_each(storage, FRAMES, ["end", None])
    assert [e.seq for e in storage.read_list(FRAMES, stop_at_tag="end")] == [seqs[0]]
