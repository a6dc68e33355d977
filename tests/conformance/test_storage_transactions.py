"""Conformance: the one-scope transaction rule, rollback of failed transactions, typed errors."""

from __future__ import annotations

import pytest

from tests.conformance.backends import BackendHarness
from tests.conformance.storage_helpers import now_and_after_reopen
from turnkeep.storage import (
    EntryConflictError,
    Storage,
    StorageError,
    StorageValidationError,
    TransactionScopeError,
    UsageRow,
    Write,
    append_list,
    delete_list,
    delete_value,
    ephemeral_scope,
    insert_entry,
    insert_usage,
    retire_scope,
    set_value,
    value,
    value_list,
)

SCOPE = ephemeral_scope("op-1")


def _assert_rejected_without_side_effects(
    storage: Storage, writes: list[Write], error: type[StorageError]
) -> None:
    """Commit a marker, fail `writes`, commit again: state unchanged, no sequence consumed."""
    marker = storage.commit([set_value(value("marker"), "before")])
    with pytest.raises(error):
        storage.commit(writes)
    after = storage.commit([set_value(value("marker"), "after")])
    assert after.first_seq == marker.seqs[-1] + 1


def test_mixed_session_and_ephemeral_transaction_is_rejected_before_any_mutation(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    writes: list[Write] = [
        set_value(value("state"), "session"),
        set_value(value("memo", "k", SCOPE), "scoped"),
    ]
    _assert_rejected_without_side_effects(storage, writes, TransactionScopeError)
    assert storage.get_value(value("state")) is None
    assert storage.get_value(value("memo", "k", SCOPE)) is None


def test_mixed_transaction_error_names_the_ephemeral_scope(backend: BackendHarness) -> None:
    storage = backend.open()
    with pytest.raises(TransactionScopeError, match="op-1"):
        storage.commit([append_list(value_list("f", "", SCOPE), 1), set_value(value("s"), 1)])


def test_two_ephemeral_ids_in_one_transaction_are_rejected_before_any_mutation(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    a = value("memo", "k", ephemeral_scope("A"))
    b = value("memo", "k", ephemeral_scope("B"))
    with pytest.raises(TransactionScopeError, match=r"'A'.*'B'"):
        storage.commit([set_value(a, 1), set_value(b, 2)])
    _assert_rejected_without_side_effects(storage, [set_value(a, 1), set_value(b, 2)], StorageError)
    assert storage.get_value(a) is None
    assert storage.get_value(b) is None


def test_ephemeral_transaction_holding_a_session_write_is_rejected_before_any_mutation(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    storage.commit([set_value(value("memo", "k", ephemeral_scope("other")), "live")])
    scoped = value("memo", "k", SCOPE)
    session_writes: list[Write] = [
        insert_entry("e1", None, "message", {"text": "hi"}),
        insert_usage(UsageRow(input_tokens=5)),
        retire_scope(ephemeral_scope("other")),
        delete_value(value("state")),
        delete_list(value_list("frames")),
    ]
    for session_write in session_writes:
        _assert_rejected_without_side_effects(
            storage, [set_value(scoped, 1), session_write], TransactionScopeError
        )
        _assert_rejected_without_side_effects(
            storage,
            [session_write, append_list(value_list("f", "", SCOPE), 1)],
            TransactionScopeError,
        )
    assert storage.get_value(scoped) is None
    assert storage.read_list(value_list("f", "", SCOPE)) == []
    assert storage.get_entries(["e1"]) == []
    assert storage.get_stats().usage_rows == 0
    assert storage.get_value(value("memo", "k", ephemeral_scope("other"))) is not None


def test_non_write_objects_are_rejected_naming_their_position(backend: BackendHarness) -> None:
    storage = backend.open()
    with pytest.raises(StorageValidationError, match="#1"):
        storage.commit([set_value(value("a"), 1), ("set", "b", 2)])  # type: ignore[list-item]
    assert storage.get_value(value("a")) is None


def test_failed_transaction_applies_none_of_its_writes(backend: BackendHarness) -> None:
    storage = backend.open()
    storage.commit([insert_entry("root", None, "message")])
    writes: list[Write] = [
        set_value(value("state"), "new"),
        append_list(value_list("frames"), "frame"),
        insert_usage(UsageRow(input_tokens=10, output_tokens=3, cost_micros=500_000)),
        insert_entry("child", "root", "message"),
        insert_entry("orphan", "missing-parent", "message"),
    ]
    with pytest.raises(EntryConflictError, match="missing-parent"):
        storage.commit(writes)
    for handle in now_and_after_reopen(backend, storage):
        assert handle.get_value(value("state")) is None
        assert handle.read_list(value_list("frames")) == []
        assert handle.get_entries(["child", "orphan"]) == []
        stats = handle.get_stats()
        assert (stats.entry_count, stats.usage_rows, stats.input_tokens) == (1, 0, 0)


def test_failed_transaction_restores_values_it_overwrote_or_deleted(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    kept = storage.commit(
        [
            set_value(value("overwritten"), "old"),
            set_value(value("deleted"), "still here"),
            append_list(value_list("list"), "old element"),
        ]
    )
    with pytest.raises(EntryConflictError):
        storage.commit(
            [
                set_value(value("overwritten"), "new"),
                delete_value(value("deleted")),
                delete_list(value_list("list")),
                append_list(value_list("list"), "new element"),
                insert_entry("e1", "no-such-parent", "message"),
            ]
        )
    for handle in now_and_after_reopen(backend, storage):
        overwritten = handle.get_value(value("overwritten"))
        deleted = handle.get_value(value("deleted"))
        assert overwritten is not None
        assert deleted is not None
        assert (overwritten.value, overwritten.seq) == ("old", kept.seqs[0])
        assert (deleted.value, deleted.seq) == ("still here", kept.seqs[1])
        assert [(e.value, e.seq) for e in handle.read_list(value_list("list"))] == [
            ("old element", kept.seqs[2])
        ]


def test_failed_transaction_with_a_retirement_keeps_the_scope_live(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    storage.commit([set_value(value("memo", "k", SCOPE), "progress")])
    with pytest.raises(EntryConflictError):
        storage.commit([retire_scope(SCOPE), insert_entry("e1", "no-such-parent", "message")])
    for handle in now_and_after_reopen(backend, storage):
        stored = handle.get_value(value("memo", "k", SCOPE))
        assert stored is not None
        assert stored.value == "progress"


def test_commit_rejects_a_bare_string_or_non_sequence(backend: BackendHarness) -> None:
    storage = backend.open()
    with pytest.raises(StorageValidationError, match="sequence"):
        storage.commit("set a=1")  # type: ignore[arg-type]
    with pytest.raises(StorageValidationError, match="sequence"):
        storage.commit(None)  # type: ignore[arg-type]


def test_invalid_session_id_is_rejected_naming_it(backend: BackendHarness) -> None:
    with pytest.raises(StorageValidationError, match="bad/id"):
        backend.open("bad/id")
    with pytest.raises(StorageValidationError, match=r"'\.\.'"):
        backend.open("..")


def test_reads_reject_wrong_address_kinds_with_typed_errors(backend: BackendHarness) -> None:
    storage = backend.open()
    with pytest.raises(StorageValidationError, match="value_list"):
        storage.read_list(value("ns"))  # type: ignore[arg-type]
    with pytest.raises(StorageValidationError, match="value"):
        storage.get_value(value_list("ns"))  # type: ignore[arg-type]
    with pytest.raises(StorageValidationError, match="entry ids"):
        storage.get_entries("e1")
    with pytest.raises(StorageValidationError, match="scope"):
        storage.scan_values("ns", "", "op-1")  # type: ignore[arg-type]
