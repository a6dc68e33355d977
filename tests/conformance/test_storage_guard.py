"""Conformance: a guarded commit applies only while its session-scoped guard value exists.

The guard is how a late progress write is fenced off after an operation's terminal commit: the
check and the commit are one atomic step, so the write can never recreate a retired scope.
"""

from __future__ import annotations

import pytest

from tests.conformance.backends import BackendHarness
from tests.conformance.storage_helpers import now_and_after_reopen
from turnkeep.storage import (
    GuardFailedError,
    StorageValidationError,
    append_list,
    delete_value,
    ephemeral_scope,
    insert_entry,
    retire_scope,
    set_value,
    value,
    value_list,
)

OP = ephemeral_scope("op-guarded")
RUNNING = value("turn.op", "op-guarded")
FRAMES = value_list("turn.frames", "r1", OP)


def test_guarded_scoped_commit_applies_while_the_guard_value_exists(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    storage.commit([set_value(RUNNING, {"status": "running"})])
    result = storage.commit([append_list(FRAMES, "hello")], guard=RUNNING)
    assert [e.value for e in storage.read_list(FRAMES)] == ["hello"]
    assert result.seqs == (2,)


def test_guarded_commit_after_the_guard_is_gone_is_refused_and_writes_nothing(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    storage.commit([set_value(RUNNING, {"status": "running"})])
    storage.commit([append_list(FRAMES, "early")], guard=RUNNING)
    terminal = storage.commit([delete_value(RUNNING), retire_scope(OP)])
    with pytest.raises(GuardFailedError, match=r"turn\.op"):
        storage.commit([append_list(FRAMES, "late")], guard=RUNNING)
    assert storage.read_list(FRAMES) == []
    storage = backend.reopen(storage)
    assert storage.read_list(FRAMES) == []
    # The refused commit consumed no sequence.
    after = storage.commit([set_value(value("probe"), 1)])
    assert after.seqs == (terminal.seqs[-1] + 1,)


def test_guarded_session_commit_is_refused_as_a_whole_when_the_guard_is_absent(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    with pytest.raises(GuardFailedError):
        storage.commit(
            [set_value(value("call", "c1"), "started"), insert_entry("e1", None, "message")],
            guard=RUNNING,
        )
    assert storage.get_value(value("call", "c1")) is None
    assert storage.get_entries(["e1"]) == []
    assert storage.get_stats().entry_count == 0


def test_a_guarded_commit_may_delete_its_own_guard(backend: BackendHarness) -> None:
    storage = backend.open()
    storage.commit([set_value(RUNNING, "running")])
    storage.commit([delete_value(RUNNING), retire_scope(OP)], guard=RUNNING)
    assert storage.get_value(RUNNING) is None
    with pytest.raises(GuardFailedError):
        storage.commit([delete_value(RUNNING), retire_scope(OP)], guard=RUNNING)


def test_a_guard_in_an_ephemeral_scope_is_rejected_as_bad_input(backend: BackendHarness) -> None:
    storage = backend.open()
    with pytest.raises(StorageValidationError, match="session-scoped"):
        storage.commit([append_list(FRAMES, "x")], guard=value("turn.op", "k", OP))


def test_a_guard_written_by_the_same_transaction_does_not_satisfy_itself(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    with pytest.raises(GuardFailedError):
        storage.commit([set_value(RUNNING, "running"), set_value(value("call"), 1)], guard=RUNNING)
    assert storage.get_value(RUNNING) is None
    assert storage.get_value(value("call")) is None
    assert storage.commit([set_value(value("probe"), 1)]).seqs == (1,)


def test_a_recreated_guard_admits_the_next_lifetime_and_the_late_write_stays_out(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    storage.commit([set_value(RUNNING, "running")])
    storage.commit([append_list(FRAMES, "first")], guard=RUNNING)
    storage.commit([delete_value(RUNNING), retire_scope(OP)])
    with pytest.raises(GuardFailedError):
        storage.commit([append_list(FRAMES, "late")], guard=RUNNING)
    storage.commit([set_value(RUNNING, "running again")])
    second = storage.commit([append_list(FRAMES, "second")], guard=RUNNING)
    for handle in now_and_after_reopen(backend, storage):
        assert [(e.value, e.seq) for e in handle.read_list(FRAMES)] == [
            ("second", second.first_seq)
        ]


def test_a_guard_with_its_sequence_applies_only_while_the_value_is_still_that_version(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    first = storage.commit([set_value(RUNNING, {"phase": "pending"})]).seqs[0]
    claimed = storage.commit(
        [set_value(RUNNING, {"phase": "started"})], guard=RUNNING, guard_seq=first
    )
    with pytest.raises(GuardFailedError, match=r"turn\.op"):
        # A second claimant read the same version: it lost, and nothing of it is written.
        storage.commit(
            [set_value(RUNNING, {"phase": "started", "by": "second"})],
            guard=RUNNING,
            guard_seq=first,
        )
    stored = storage.get_value(RUNNING)
    assert stored is not None
    assert (stored.value, stored.seq) == ({"phase": "started"}, claimed.seqs[0])
    after = storage.commit([set_value(value("probe"), 1)])
    assert after.seqs == (claimed.seqs[0] + 1,)  # the refused commit consumed no sequence


def test_a_scoped_commit_guarded_by_a_stale_version_is_refused(backend: BackendHarness) -> None:
    storage = backend.open()
    first = storage.commit([set_value(RUNNING, 1)]).seqs[0]
    storage.commit([set_value(RUNNING, 2)])
    with pytest.raises(GuardFailedError):
        storage.commit([append_list(FRAMES, "late")], guard=RUNNING, guard_seq=first)
    assert storage.read_list(FRAMES) == []


@pytest.mark.parametrize("bad", [0, -1, True, "1"])
def test_a_guard_sequence_that_is_not_a_positive_integer_is_bad_input(
    backend: BackendHarness, bad: object
) -> None:
    storage = backend.open()
    with pytest.raises(StorageValidationError, match="guard_seq"):
        storage.commit([set_value(value("x"), 1)], guard=RUNNING, guard_seq=bad)  # type: ignore[arg-type]
