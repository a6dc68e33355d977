"""Conformance: retire_scope deletes exactly one scope's lifetime (docs/storage.md)."""

from __future__ import annotations

from tests.conformance.backends import BackendHarness
from tests.conformance.storage_helpers import now_and_after_reopen
from turnkeep.storage import (
    SESSION_SCOPE,
    Storage,
    append_list,
    ephemeral_scope,
    insert_entry,
    retire_scope,
    set_value,
    value,
    value_list,
)

A = ephemeral_scope("op-A")
B = ephemeral_scope("op-B")


def _fill(storage: Storage, scope_id: str) -> None:
    scope = ephemeral_scope(scope_id)
    storage.commit(
        [
            set_value(value("memo", "k1", scope), f"{scope_id}-1"),
            set_value(value("output", "k2", scope), f"{scope_id}-2"),
            append_list(value_list("frames", "r1", scope), f"{scope_id}-f1"),
            append_list(value_list("frames", "r2", scope), f"{scope_id}-f2", tag="end"),
        ]
    )


def _scope_is_empty(storage: Storage, scope_id: str) -> bool:
    scope = ephemeral_scope(scope_id)
    return (
        storage.get_value(value("memo", "k1", scope)) is None
        and storage.get_value(value("output", "k2", scope)) is None
        and storage.scan_values("memo", scope=scope) == []
        and storage.scan_values("output", scope=scope) == []
        and storage.read_list(value_list("frames", "r1", scope)) == []
        and storage.read_list(value_list("frames", "r2", scope)) == []
    )


def _scope_is_full(storage: Storage, scope_id: str) -> bool:
    scope = ephemeral_scope(scope_id)
    memo = storage.get_value(value("memo", "k1", scope))
    frames = storage.read_list(value_list("frames", "r2", scope))
    return (
        memo is not None
        and memo.value == f"{scope_id}-1"
        and [(e.value, e.tag) for e in frames] == [(f"{scope_id}-f2", "end")]
    )


def test_retirement_deletes_every_value_and_list_of_exactly_that_scope(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    _fill(storage, "op-A")
    _fill(storage, "op-B")
    storage.commit(
        [
            set_value(value("memo", "k1"), "session memo"),
            append_list(value_list("frames", "r1"), "session frame"),
        ]
    )
    storage.commit([retire_scope(A)])
    for handle in now_and_after_reopen(backend, storage):
        assert _scope_is_empty(handle, "op-A")
        assert _scope_is_full(handle, "op-B")
        session_memo = handle.get_value(value("memo", "k1", SESSION_SCOPE))
        assert session_memo is not None
        assert session_memo.value == "session memo"
        assert [e.value for e in handle.read_list(value_list("frames", "r1"))] == ["session frame"]


def test_retirement_does_not_touch_a_scope_whose_id_shares_a_prefix(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    _fill(storage, "op")
    _fill(storage, "op-1")
    _fill(storage, "op-10")
    storage.commit([retire_scope(ephemeral_scope("op-1"))])
    storage = backend.reopen(storage)
    assert _scope_is_empty(storage, "op-1")
    assert _scope_is_full(storage, "op")
    assert _scope_is_full(storage, "op-10")


def test_retirement_is_atomic_with_its_sibling_session_writes(backend: BackendHarness) -> None:
    storage = backend.open()
    _fill(storage, "op-A")
    storage.commit([insert_entry("root", None, "message")])
    result = storage.commit(
        [
            set_value(value("op.state", "op-A"), "completed"),
            insert_entry("answer", "root", "message", {"text": "done"}),
            retire_scope(A),
            append_list(value_list("events"), "turn finished"),
        ]
    )
    assert len(result.seqs) == 4
    for handle in now_and_after_reopen(backend, storage):
        assert _scope_is_empty(handle, "op-A")
        state = handle.get_value(value("op.state", "op-A"))
        assert state is not None
        assert (state.value, state.seq) == ("completed", result.seqs[0])
        assert [e.seq for e in handle.get_entries(["answer"])] == [result.seqs[1]]
        assert [e.seq for e in handle.read_list(value_list("events"))] == [result.seqs[3]]


def test_retiring_a_scope_that_holds_no_state_is_legal_and_consumes_a_sequence(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    before = storage.commit([set_value(value("x"), 1)])
    retired = storage.commit([retire_scope(ephemeral_scope("never-used"))])
    assert retired.first_seq is not None
    assert len(retired.seqs) == 1
    assert retired.seqs[0] > before.seqs[0]
    after = storage.commit([set_value(value("x"), 2)])
    assert after.seqs[0] > retired.seqs[0]


def test_write_after_retirement_starts_a_new_lifetime_with_only_new_state(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    _fill(storage, "op-A")
    retired = storage.commit([retire_scope(A)])
    reused = storage.commit(
        [
            set_value(value("memo", "fresh", A), "new lifetime"),
            append_list(value_list("frames", "r1", A), "new frame"),
        ]
    )
    assert reused.seqs[0] > retired.seqs[0]
    for handle in now_and_after_reopen(backend, storage):
        assert handle.get_value(value("memo", "k1", A)) is None
        fresh = handle.get_value(value("memo", "fresh", A))
        assert fresh is not None
        assert (fresh.value, fresh.seq) == ("new lifetime", reused.seqs[0])
        frames = handle.read_list(value_list("frames", "r1", A))
        assert [(e.value, e.seq) for e in frames] == [("new frame", reused.seqs[1])]
        assert [v.address.key for v in handle.scan_values("memo", scope=A)] == ["fresh"]


def test_repeated_retirement_does_not_make_later_writes_disappear(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    _fill(storage, "op-A")
    storage.commit([retire_scope(A)])
    storage.commit([retire_scope(A), retire_scope(A)])
    reused = storage.commit([set_value(value("memo", "k1", A), "after both")])
    for handle in now_and_after_reopen(backend, storage):
        memo = handle.get_value(value("memo", "k1", A))
        assert memo is not None
        assert (memo.value, memo.seq) == ("after both", reused.seqs[0])


def test_retirement_twice_in_one_transaction_is_legal(backend: BackendHarness) -> None:
    storage = backend.open()
    _fill(storage, "op-A")
    result = storage.commit([retire_scope(A), retire_scope(A), retire_scope(B)])
    assert len(result.seqs) == 3
    assert _scope_is_empty(backend.reopen(storage), "op-A")


def test_multiple_retire_and_reuse_cycles_keep_only_the_latest_lifetime(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    frames = value_list("frames", "r", A)
    for cycle in range(4):
        storage.commit([append_list(frames, f"cycle {cycle}"), set_value(value("m", "", A), cycle)])
        storage.commit([append_list(frames, f"cycle {cycle} again")])
        if cycle < 3:
            storage.commit([retire_scope(A)])
    for handle in now_and_after_reopen(backend, storage):
        assert [e.value for e in handle.read_list(frames)] == ["cycle 3", "cycle 3 again"]
        memo = handle.get_value(value("m", "", A))
        assert memo is not None
        assert memo.value == 3


def test_retired_state_stays_gone_after_reopen(backend: BackendHarness) -> None:
    storage = backend.open()
    _fill(storage, "op-A")
    storage = backend.reopen(storage)
    assert _scope_is_full(storage, "op-A")
    storage.commit([retire_scope(A)])
    storage = backend.reopen(storage)
    assert _scope_is_empty(storage, "op-A")
    storage = backend.reopen(storage)
    assert _scope_is_empty(storage, "op-A")


def test_state_reused_after_retirement_survives_reopen_and_another_reopen(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    _fill(storage, "op-A")
    storage.commit([retire_scope(A)])
    storage = backend.reopen(storage)
    _fill(storage, "op-A")
    storage = backend.reopen(storage)
    assert _scope_is_full(storage, "op-A")
    storage = backend.reopen(storage)
    assert _scope_is_full(storage, "op-A")


def test_retirement_leaves_entries_and_stats_alone(backend: BackendHarness) -> None:
    storage = backend.open()
    storage.commit([insert_entry("e1", None, "message", "hello")])
    _fill(storage, "op-A")
    stats_before = storage.get_stats()
    storage.commit([retire_scope(A)])
    assert storage.get_stats() == stats_before
    assert [e.id for e in storage.get_entries(["e1"])] == ["e1"]
