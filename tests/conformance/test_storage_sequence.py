"""Conformance: one session-global, strictly increasing sequence (docs/storage.md)."""

from __future__ import annotations

from tests.conformance.backends import BackendHarness
from turnkeep.storage import (
    append_list,
    delete_value,
    ephemeral_scope,
    insert_entry,
    retire_scope,
    set_value,
    value,
    value_list,
)

A = ephemeral_scope("op-A")
B = ephemeral_scope("op-B")


def test_main_scoped_retirement_and_reused_commits_share_one_increasing_sequence(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    main = storage.commit([set_value(value("state"), 1), insert_entry("e1", None, "message")])
    scope_a = storage.commit([append_list(value_list("frames", "", A), "a1")])
    scope_b = storage.commit([set_value(value("memo", "", B), "b1")])
    main_again = storage.commit([set_value(value("state"), 2)])
    retirement = storage.commit([retire_scope(A)])
    reused_a = storage.commit([append_list(value_list("frames", "", A), "a2")])
    in_admission_order = [
        *main.seqs,
        *scope_a.seqs,
        *scope_b.seqs,
        *main_again.seqs,
        *retirement.seqs,
        *reused_a.seqs,
    ]
    assert in_admission_order == sorted(set(in_admission_order))
    assert len(in_admission_order) == 7


def test_a_commit_gets_one_increasing_sequence_per_write(backend: BackendHarness) -> None:
    storage = backend.open()
    result = storage.commit(
        [
            set_value(value("a"), 1),
            delete_value(value("b")),
            append_list(value_list("l"), 1),
            retire_scope(A),
            insert_entry("e1", None, "message"),
        ]
    )
    assert len(result.seqs) == 5
    assert list(result.seqs) == sorted(set(result.seqs))
    assert result.first_seq == result.seqs[0]
    assert result.first_seq >= 1
    assert isinstance(result.timestamp, int)
    assert result.timestamp > 1_600_000_000_000  # milliseconds since the epoch


def test_stored_records_carry_the_sequence_of_their_write(backend: BackendHarness) -> None:
    storage = backend.open()
    result = storage.commit(
        [
            set_value(value("a"), "x"),
            append_list(value_list("l"), "y"),
            insert_entry("e1", None, "message"),
        ]
    )
    stored = storage.get_value(value("a"))
    assert stored is not None
    assert stored.seq == result.seqs[0]
    assert [e.seq for e in storage.read_list(value_list("l"))] == [result.seqs[1]]
    assert [e.seq for e in storage.get_entries(["e1"])] == [result.seqs[2]]


def test_an_empty_commit_consumes_no_sequence(backend: BackendHarness) -> None:
    storage = backend.open()
    first = storage.commit([set_value(value("a"), 1)])
    empty = storage.commit([])
    assert (empty.first_seq, empty.seqs) == (None, ())
    assert empty.stats == storage.get_stats()
    after = storage.commit([set_value(value("a"), 2)])
    assert after.first_seq == first.seqs[-1] + 1


def test_an_empty_commit_on_a_fresh_session_consumes_no_sequence(backend: BackendHarness) -> None:
    storage = backend.open("s1")
    assert storage.commit([]).seqs == ()
    storage = backend.reopen(storage)
    assert storage.commit([]).seqs == ()
    first = storage.commit([set_value(value("a"), 1)])
    untouched = backend.open("s2").commit([set_value(value("a"), 1)])
    assert first.first_seq == untouched.first_seq


def test_list_elements_show_sequence_gaps_where_other_writes_interleaved(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    frames = value_list("frames", "", A)
    one = storage.commit([append_list(frames, 1)]).seqs[0]
    storage.commit([set_value(value("other"), "x")])
    storage.commit([set_value(value("memo", "", B), "y")])
    two = storage.commit([append_list(frames, 2)]).seqs[0]
    assert [e.seq for e in storage.read_list(frames)] == [one, two]
    assert two > one + 1


def test_first_commit_after_reopen_allocates_above_every_prior_sequence(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    seen: list[int] = []
    seen += storage.commit([set_value(value("a"), 1)]).seqs
    seen += storage.commit([append_list(value_list("f", "", A), i) for i in range(3)]).seqs
    seen += storage.commit([set_value(value("m", "", B), 1)]).seqs
    storage = backend.reopen(storage)
    after = storage.commit([set_value(value("a"), 2)])
    assert after.seqs[0] > max(seen)


def test_sequence_is_not_reused_after_a_retirement_deleted_the_highest_records(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    seen: list[int] = []
    seen += storage.commit([set_value(value("a"), 1)]).seqs
    seen += storage.commit([append_list(value_list("f", "", A), i) for i in range(5)]).seqs
    seen += storage.commit([set_value(value("m", "", A), "highest scoped")]).seqs
    seen += storage.commit([retire_scope(A)]).seqs
    storage = backend.reopen(storage)
    reused = storage.commit([set_value(value("m", "", A), "new lifetime")])
    assert reused.seqs[0] > max(seen)
    seen += reused.seqs
    seen += storage.commit([retire_scope(A)]).seqs
    storage = backend.reopen(storage)
    assert storage.commit([set_value(value("a"), 2)]).seqs[0] > max(seen)


def test_sequence_is_not_reused_after_the_last_commit_was_scoped_and_then_retired_in_reopen(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    storage.commit([set_value(value("a"), 1)])
    scoped = storage.commit([set_value(value("m", "", B), "only scoped")])
    storage = backend.reopen(storage)
    retired = storage.commit([retire_scope(B)])
    assert retired.seqs[0] > scoped.seqs[0]
    storage = backend.reopen(storage)
    assert storage.commit([set_value(value("m", "", B), 1)]).seqs[0] > retired.seqs[0]


def test_several_reopens_never_reuse_a_sequence(backend: BackendHarness) -> None:
    storage = backend.open()
    seen: list[int] = []
    for round_no in range(4):
        scope = ephemeral_scope(f"op-{round_no}")
        seen += storage.commit([set_value(value("m", "", scope), round_no)]).seqs
        seen += storage.commit([set_value(value("s"), round_no), retire_scope(scope)]).seqs
        storage = backend.reopen(storage)
    assert seen == sorted(set(seen))
    assert storage.commit([set_value(value("s"), "end")]).seqs[0] > max(seen)
