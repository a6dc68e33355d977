"""memory:// — the in-process reference backend."""

from __future__ import annotations

import threading

from turnkeep.storage.addresses import Value, ValueList
from turnkeep.storage.base import ListOrder, Repository, Storage, now_ms, validate_session_id
from turnkeep.storage.blobs import BlobStore, DictBlobs
from turnkeep.storage.memory_state import MemoryState
from turnkeep.storage.records import (
    CommitResult,
    Entry,
    ListElement,
    Snapshot,
    StorageStats,
    StoredValue,
)
from turnkeep.storage.scopes import Scope
from turnkeep.storage.writes import Transaction


class MemoryStorage(Storage):
    """A handle on resident state; handles of one session share the state and its lock."""

    def __init__(self, session_id: str, state: MemoryState) -> None:
        super().__init__(session_id, lock=state.lock)
        self._state = state

    def _commit(self, txn: Transaction) -> CommitResult:
        self._state.check(txn)
        first = self._state.next_seq
        seqs = self._state.apply(txn, first)
        return CommitResult(first, seqs, now_ms(), self._state.stats)

    def _get_value(self, address: Value) -> StoredValue | None:
        return self._state.get_value(address)

    def _scan_values(self, namespace: str, key_prefix: str, scope: Scope) -> list[StoredValue]:
        return self._state.scan_values(namespace, key_prefix, scope)

    def _read_list(
        self, address: ValueList, cursor: int | None, order: ListOrder, limit: int
    ) -> list[ListElement]:
        return self._state.read_list(address, cursor, order, limit)

    def _get_entries(self, ids: list[str]) -> list[Entry]:
        return self._state.get_entries(ids)

    def _scan_entries(self, after_seq: int | None, limit: int | None) -> list[Entry]:
        return self._state.scan_entries(after_seq, limit)

    def _get_stats(self) -> StorageStats:
        return self._state.stats

    def _snapshot(self) -> Snapshot:
        return self._state.snapshot()

    def _blobs(self) -> BlobStore:
        return DictBlobs(self._state.blobs)

    def _close(self) -> None:
        """Nothing to flush: commits apply synchronously under the shared lock."""


class MemoryRepository(Repository):
    """Sessions held in this process; a reopen sees the same state."""

    def __init__(self) -> None:
        self._states: dict[str, MemoryState] = {}
        self._lock = threading.Lock()

    def open(self, session_id: str) -> MemoryStorage:
        validate_session_id(session_id)
        with self._lock:
            state = self._states.setdefault(session_id, MemoryState())
        return MemoryStorage(session_id, state)

    def list_sessions(self) -> list[str]:
        with self._lock:
            return sorted(self._states)

    def delete_session(self, session_id: str) -> None:
        with self._lock:
            self._states.pop(session_id, None)


_REPOSITORIES: dict[str, MemoryRepository] = {}
_REGISTRY_LOCK = threading.Lock()


def memory_repository(name: str = "") -> MemoryRepository:
    """The process-wide memory repository called `name` (`memory://name`)."""
    with _REGISTRY_LOCK:
        return _REPOSITORIES.setdefault(name, MemoryRepository())
