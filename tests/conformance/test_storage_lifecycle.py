"""Conformance: close, thread safety and the repository (list and delete sessions)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tests.conformance.backends import BackendHarness
from turnkeep.storage import (
    CommitResult,
    Storage,
    StorageClosedError,
    StorageStats,
    append_list,
    ephemeral_scope,
    insert_entry,
    retire_scope,
    set_value,
    value,
    value_list,
)

THREADS = 4


def test_close_is_idempotent(backend: BackendHarness) -> None:
    storage = backend.open()
    storage.commit([set_value(value("a"), 1)])
    storage.close()
    storage.close()
    assert storage.closed


CLOSED_CALLS: dict[str, Callable[[Storage], object]] = {
    "commit": lambda s: s.commit([set_value(value("a"), 2)]),
    "scoped-commit": lambda s: s.commit([set_value(value("a", "", ephemeral_scope("op")), 2)]),
    "empty-commit": lambda s: s.commit([]),
    "get_value": lambda s: s.get_value(value("a")),
    "scan_values": lambda s: s.scan_values("a"),
    "read_list": lambda s: s.read_list(value_list("l")),
    "get_entries": lambda s: s.get_entries(["e1"]),
    "scan_entries": lambda s: s.scan_entries(),
    "scan_branch": lambda s: s.scan_branch("e1"),
    "get_stats": lambda s: s.get_stats(),
    "snapshot": lambda s: s.snapshot(),
}


def test_closed_storage_rejects_reads_and_writes(backend: BackendHarness) -> None:
    storage = backend.open()
    storage.commit([set_value(value("a"), 1), insert_entry("e1", None, "message")])
    storage.close()
    failures: list[str] = []
    for name, call in CLOSED_CALLS.items():
        try:
            call(storage)
            failures.append(f"{name} succeeded on a closed handle")
        except StorageClosedError as exc:
            if "'s1'" not in str(exc):
                failures.append(f"{name}: {exc} does not name the session")
    assert failures == []


def test_write_rejected_by_a_closed_handle_is_not_applied(backend: BackendHarness) -> None:
    storage = backend.open()
    storage.commit([set_value(value("a"), 1)])
    storage.close()
    with pytest.raises(StorageClosedError):
        storage.commit([set_value(value("a"), 2)])
    stored = backend.open().get_value(value("a"))
    assert stored is not None
    assert stored.value == 1


def test_close_drains_admitted_commits_and_rejects_the_rest(backend: BackendHarness) -> None:
    storage = backend.open()
    results: dict[tuple[int, int], CommitResult] = {}
    rejected: list[tuple[int, int]] = []
    other_errors: list[BaseException] = []
    started = threading.Barrier(THREADS + 1)
    lock = threading.Lock()

    def writer(thread_no: int) -> None:
        started.wait()
        scope = ephemeral_scope(f"op-{thread_no}")
        for i in range(20_000):  # ends at the first StorageClosedError
            if i % 2:
                writes = [set_value(value("v", f"{thread_no}-{i}", scope), i)]
            else:
                writes = [set_value(value("v", f"{thread_no}-{i}"), i)]
            try:
                result = storage.commit(writes)
            except StorageClosedError:
                with lock:
                    rejected.append((thread_no, i))
                return
            except BaseException as exc:  # pragma: no cover - reported below
                with lock:
                    other_errors.append(exc)
                return
            with lock:
                results[(thread_no, i)] = result

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    started.wait()
    while True:
        with lock:
            if len(results) >= THREADS * 3:
                break
        time.sleep(0.001)
    storage.close()
    for thread in threads:
        thread.join(timeout=60)
    assert other_errors == []
    assert rejected, "close() should reject commits that arrive after it"
    reopened = backend.open()
    for (thread_no, i), result in results.items():
        scope = ephemeral_scope(f"op-{thread_no}") if i % 2 else None
        addr = value("v", f"{thread_no}-{i}", scope) if scope else value("v", f"{thread_no}-{i}")
        stored = reopened.get_value(addr)
        assert stored is not None, f"commit {thread_no}-{i} returned but is not persisted"
        assert stored.seq == result.seqs[0]


def test_concurrent_commits_on_one_handle_get_unique_sequences_and_none_is_lost(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    per_thread = 25
    seqs: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    started = threading.Barrier(THREADS)

    def writer(thread_no: int) -> None:
        started.wait()
        scope = ephemeral_scope(f"op-{thread_no}")
        try:
            for i in range(per_thread):
                if i % 2:
                    result = storage.commit([append_list(value_list("f", "", scope), i)])
                else:
                    result = storage.commit(
                        [
                            append_list(value_list("events"), f"{thread_no}-{i}"),
                            insert_entry(f"e-{thread_no}-{i}", None, "message"),
                        ]
                    )
                with lock:
                    seqs.extend(result.seqs)
        except BaseException as exc:  # pragma: no cover - reported below
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert len(seqs) == len(set(seqs))
    storage = backend.reopen(storage)
    events = storage.read_list(value_list("events"), limit=10000)
    session_writes = THREADS * ((per_thread + 1) // 2)
    assert len(events) == session_writes
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert storage.get_stats().entry_count == session_writes
    for n in range(THREADS):
        frames = storage.read_list(value_list("f", "", ephemeral_scope(f"op-{n}")))
        assert [e.value for e in frames] == list(range(1, per_thread, 2))
    assert storage.commit([set_value(value("end"), 1)]).seqs[0] > max(seqs)


# -- repository ------------------------------------------------------------------------------


def test_repository_lists_exactly_the_sessions_with_data(backend: BackendHarness) -> None:
    for session_id in ("s2", "s1", "other.session:3"):
        backend.open(session_id).commit([set_value(value("a"), session_id)])
    repository = backend.repository()
    try:
        assert repository.list_sessions() == ["other.session:3", "s1", "s2"]
    finally:
        repository.close()


def test_repository_delete_removes_one_sessions_data_including_scoped_state(
    backend: BackendHarness,
) -> None:
    scope = ephemeral_scope("op-1")
    for session_id in ("s1", "s2"):
        storage = backend.open(session_id)
        storage.commit([insert_entry("e1", None, "message"), set_value(value("a"), session_id)])
        storage.commit(
            [
                set_value(value("m", "", scope), session_id),
                append_list(value_list("f", "", scope), session_id),
            ]
        )
        storage.close()
    repository = backend.repository()
    try:
        repository.delete_session("s1")
        assert repository.list_sessions() == ["s2"]
        repository.delete_session("never-existed")
    finally:
        repository.close()
    gone = backend.open("s1")
    assert gone.get_value(value("a")) is None
    assert gone.get_value(value("m", "", scope)) is None
    assert gone.read_list(value_list("f", "", scope)) == []
    assert gone.get_entries(["e1"]) == []
    assert gone.get_stats() == StorageStats()
    kept = backend.open("s2")
    kept_scoped = kept.get_value(value("m", "", scope))
    assert kept_scoped is not None
    assert kept_scoped.value == "s2"
    assert [e.value for e in kept.read_list(value_list("f", "", scope))] == ["s2"]
    assert [e.id for e in kept.get_entries(["e1"])] == ["e1"]


def test_repository_open_gives_a_handle_on_the_same_session(backend: BackendHarness) -> None:
    backend.open("s1").commit([set_value(value("a"), 1), retire_scope(ephemeral_scope("x"))])
    repository = backend.repository()
    try:
        handle = repository.open("s1")
        try:
            stored = handle.get_value(value("a"))
            assert stored is not None
            assert stored.value == 1
        finally:
            handle.close()
    finally:
        repository.close()
