"""Conformance: transcript entries, session stats and fork snapshots."""

from __future__ import annotations

import dataclasses

import pytest

from tests.conformance.backends import BackendHarness
from tests.conformance.storage_helpers import now_and_after_reopen
from turnkeep.storage import (
    FORK_MARKER,
    SESSION_SCOPE,
    EntryConflictError,
    Storage,
    StorageStats,
    StorageValidationError,
    UsageRow,
    append_list,
    ephemeral_scope,
    fork_session,
    insert_entry,
    insert_usage,
    retire_scope,
    set_value,
    value,
    value_list,
)


def _tree(storage: Storage) -> None:
    """root -> a -> a1, root -> b (one branch point)."""
    storage.commit(
        [insert_entry("root", None, "message", {"role": "user"}), insert_entry("a", "root", "tool")]
    )
    storage.commit([insert_entry("a1", "a", "message", {"text": "x"})])
    storage.commit([insert_entry("b", "root", "message")])


# -- entries ---------------------------------------------------------------------------------


def test_entries_form_a_tree_through_parent_ids(backend: BackendHarness) -> None:
    storage = backend.open()
    _tree(storage)
    for handle in now_and_after_reopen(backend, storage):
        got = {e.id: (e.parent_id, e.type, e.data) for e in handle.get_entries(["a1", "b", "root"])}
        assert got == {
            "root": (None, "message", {"role": "user"}),
            "a1": ("a", "message", {"text": "x"}),
            "b": ("root", "message", None),
        }


def test_an_entry_may_name_a_parent_inserted_earlier_in_the_same_transaction(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    result = storage.commit([insert_entry("p", None, "message"), insert_entry("c", "p", "tool")])
    assert [e.seq for e in storage.get_entries(["p", "c"])] == list(result.seqs)


def test_an_entry_naming_a_parent_later_in_the_same_transaction_is_rejected(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    with pytest.raises(EntryConflictError, match="'later'"):
        storage.commit([insert_entry("c", "later", "tool"), insert_entry("later", None, "message")])
    assert storage.get_entries(["c", "later"]) == []


def test_duplicate_entry_id_within_one_transaction_is_rejected_naming_it(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    with pytest.raises(EntryConflictError, match="'dup'"):
        storage.commit([insert_entry("dup", None, "message"), insert_entry("dup", None, "tool")])
    assert storage.get_entries(["dup"]) == []


def test_entry_id_already_stored_is_rejected_and_the_transaction_is_not_applied(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    first = storage.commit([insert_entry("e1", None, "message", "original")])
    storage = backend.reopen(storage)
    with pytest.raises(EntryConflictError, match="'e1'"):
        storage.commit([set_value(value("v"), 1), insert_entry("e1", None, "message", "again")])
    assert storage.get_value(value("v")) is None
    entries = storage.get_entries(["e1"])
    assert [(e.data, e.seq) for e in entries] == [("original", first.seqs[0])]
    assert storage.get_stats().entry_count == 1


def test_missing_parent_error_names_the_entry_and_the_parent(backend: BackendHarness) -> None:
    storage = backend.open()
    with pytest.raises(EntryConflictError, match=r"'child'.*'ghost'"):
        storage.commit([insert_entry("child", "ghost", "message")])


def test_get_entries_keeps_the_asked_order_and_skips_unknown_ids(backend: BackendHarness) -> None:
    storage = backend.open()
    _tree(storage)
    got = storage.get_entries(["b", "nope", "root", "a1"])
    assert [e.id for e in got] == ["b", "root", "a1"]
    assert storage.get_entries([]) == []


def test_scan_entries_pages_in_sequence_order(backend: BackendHarness) -> None:
    storage = backend.open()
    _tree(storage)
    storage.commit([set_value(value("unrelated"), 1)])
    storage.commit([insert_entry("c", "b", "message")])
    storage = backend.reopen(storage)
    every = storage.scan_entries()
    assert [e.id for e in every] == ["root", "a", "a1", "b", "c"]
    assert [e.seq for e in every] == sorted(e.seq for e in every)
    first = storage.scan_entries(limit=2)
    assert [e.id for e in first] == ["root", "a"]
    rest = storage.scan_entries(after_seq=first[-1].seq, limit=2)
    assert [e.id for e in rest] == ["a1", "b"]
    assert [e.id for e in storage.scan_entries(after_seq=rest[-1].seq)] == ["c"]
    assert storage.scan_entries(after_seq=every[-1].seq) == []


def test_scan_entries_rejects_a_bad_limit_or_cursor(backend: BackendHarness) -> None:
    storage = backend.open()
    for bad in (0, -3, "2", True):
        with pytest.raises(StorageValidationError, match="limit"):
            storage.scan_entries(limit=bad)  # type: ignore[arg-type]
    with pytest.raises(StorageValidationError, match="cursor"):
        storage.scan_entries(after_seq=-1)


def test_scan_branch_returns_the_path_from_the_root_to_the_leaf(backend: BackendHarness) -> None:
    storage = backend.open()
    _tree(storage)
    storage = backend.reopen(storage)
    assert [e.id for e in storage.scan_branch("a1")] == ["root", "a", "a1"]
    assert [e.id for e in storage.scan_branch("b")] == ["root", "b"]
    assert [e.id for e in storage.scan_branch("root")] == ["root"]


def test_scan_branch_of_an_unknown_leaf_is_rejected_naming_it(backend: BackendHarness) -> None:
    storage = backend.open()
    with pytest.raises(StorageValidationError, match="'nope'"):
        storage.scan_branch("nope")


# -- stats -----------------------------------------------------------------------------------


def test_stats_total_entries_messages_and_usage(backend: BackendHarness) -> None:
    storage = backend.open()
    assert storage.get_stats() == StorageStats()
    _tree(storage)
    result = storage.commit(
        [
            insert_usage(
                UsageRow(input_tokens=100, output_tokens=20, cost_micros=250_000, model="m")
            ),
            insert_usage(
                UsageRow(
                    input_tokens=1, cache_read_tokens=7, cache_write_tokens=3, cost_micros=500_001
                )
            ),
        ]
    )
    expected = StorageStats(
        entry_count=4,
        message_count=3,
        usage_rows=2,
        input_tokens=101,
        output_tokens=20,
        cache_read_tokens=7,
        cache_write_tokens=3,
        cost_micros=750_001,
    )
    assert result.stats == expected
    assert storage.get_stats() == expected


def test_stats_survive_reopen(backend: BackendHarness) -> None:
    storage = backend.open()
    _tree(storage)
    storage.commit([insert_usage(UsageRow(input_tokens=9, output_tokens=4, cost_micros=125_000))])
    before = storage.get_stats()
    storage = backend.reopen(storage)
    assert storage.get_stats() == before
    assert before.usage_rows == 1


def test_stats_are_immutable_and_earlier_results_do_not_change(backend: BackendHarness) -> None:
    storage = backend.open()
    first = storage.commit([insert_entry("e1", None, "message")])
    snapshot_of_stats = storage.get_stats()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot_of_stats.entry_count = 99  # type: ignore[misc]
    storage.commit([insert_entry("e2", "e1", "message")])
    assert first.stats.entry_count == 1
    assert snapshot_of_stats.entry_count == 1
    assert storage.get_stats().entry_count == 2


def test_stats_ignore_scoped_state_and_retirement(backend: BackendHarness) -> None:
    storage = backend.open()
    storage.commit([insert_entry("e1", None, "message")])
    before = storage.get_stats()
    scope = ephemeral_scope("op-1")
    scoped = storage.commit(
        [set_value(value("m", "", scope), 1), append_list(value_list("f", "", scope), 2)]
    )
    assert scoped.stats == before
    retired = storage.commit([retire_scope(scope), set_value(value("session"), 1)])
    assert retired.stats == before
    assert backend.reopen(storage).get_stats() == before


# -- snapshot --------------------------------------------------------------------------------


def test_snapshot_holds_session_state_and_never_ephemeral_state(backend: BackendHarness) -> None:
    storage = backend.open()
    scope = ephemeral_scope("op-1")
    session_result = storage.commit(
        [
            set_value(value("ns", "k"), "session value"),
            append_list(value_list("ns", "k"), "session element", tag="t"),
            insert_entry("e1", None, "message", "hello"),
            insert_usage(UsageRow(input_tokens=3)),
        ]
    )
    storage.commit(
        [
            set_value(value("ns", "k", scope), "scoped value"),
            set_value(value("scoped-only", "k", scope), "scoped value"),
            append_list(value_list("ns", "k", scope), "scoped element"),
            append_list(value_list("scoped-only", "k", scope), "scoped element"),
        ]
    )
    for handle in now_and_after_reopen(backend, storage):
        snap = handle.snapshot()
        assert [(v.address, v.value, v.seq) for v in snap.values] == [
            (value("ns", "k"), "session value", session_result.seqs[0])
        ]
        assert [(addr, [(e.value, e.tag) for e in elements]) for addr, elements in snap.lists] == [
            (value_list("ns", "k"), [("session element", "t")])
        ]
        assert all(v.address.scope == SESSION_SCOPE for v in snap.values)
        assert [(e.id, e.data) for e in snap.entries] == [("e1", "hello")]
        assert [u.input_tokens for u in snap.usage] == [3]


def test_usage_rows_keep_their_micro_dollar_cost_estimate_mark_and_turn(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    rows = [
        UsageRow(
            input_tokens=1_200,
            output_tokens=300,
            cache_read_tokens=40,
            cache_write_tokens=5,
            cost_micros=8_112,
            model="anthropic.claude-3-5-haiku",
            estimated=False,
            op_id="op-1",
        ),
        UsageRow(input_tokens=7, output_tokens=2, cost_micros=1, estimated=True, op_id="op-2"),
    ]
    storage.commit([insert_usage(row) for row in rows])

    for handle in now_and_after_reopen(backend, storage):
        assert list(handle.snapshot().usage) == rows
        stats = handle.get_stats()
        assert (stats.usage_rows, stats.cost_micros) == (2, 8_113)
        assert isinstance(stats.cost_micros, int)


def test_snapshot_of_a_fresh_session_is_empty(backend: BackendHarness) -> None:
    snap = backend.open().snapshot()
    assert (snap.values, snap.lists, snap.entries, snap.usage) == ((), (), (), ())


# -- fork ------------------------------------------------------------------------------------


def test_a_fork_copies_session_state_entries_and_usage_but_no_ephemeral_state(
    backend: BackendHarness,
) -> None:
    source = backend.open("fork-source")
    scope = ephemeral_scope("op-in-flight")
    source.commit(
        [
            set_value(value("ns", "k"), {"kept": True}),
            append_list(value_list("ns", "log"), "first", tag="t1"),
            append_list(value_list("ns", "log"), "second"),
            insert_entry("root", None, "message", {"text": "hi"}),
            insert_usage(UsageRow(input_tokens=5, output_tokens=2)),
        ]
    )
    for start in range(0, 60, 20):  # the aws backend commits at most ~45 entries at once
        source.commit(
            [
                insert_entry(f"e{i}", "root" if i == 0 else f"e{i - 1}", "message", i)
                for i in range(start, start + 20)
            ]
        )
    source.commit(
        [
            set_value(value("ns", "k", scope), "in flight"),
            append_list(value_list("ns", "log", scope), "frame"),
        ]
    )
    target = backend.open("fork-target")

    results = fork_session(source, target, chunk=7)

    assert len(results) > 1  # chunked, each chunk one transaction
    for handle in now_and_after_reopen(backend, target):
        assert handle.get_value(value("ns", "k")).value == {"kept": True}  # type: ignore[union-attr]
        assert [(e.value, e.tag) for e in handle.read_list(value_list("ns", "log"))] == [
            ("first", "t1"),
            ("second", None),
        ]
        assert [e.id for e in handle.scan_branch("e59")] == ["root", *[f"e{i}" for i in range(60)]]
        assert handle.get_stats() == source.get_stats()
        assert handle.get_value(value("ns", "k", scope)) is None
        assert handle.read_list(value_list("ns", "log", scope)) == []
        assert handle.get_value(FORK_MARKER).value == "fork-source"  # type: ignore[union-attr]


def test_a_fork_into_a_session_that_already_holds_state_is_refused(
    backend: BackendHarness,
) -> None:
    source = backend.open("fork-source")
    source.commit([set_value(value("ns", "k"), 1)])
    target = backend.open("fork-target")
    target.commit([set_value(value("other"), 2)])

    with pytest.raises(StorageValidationError, match="not empty"):
        fork_session(source, target)
    assert target.get_value(value("ns", "k")) is None
