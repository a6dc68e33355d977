"""The Storage contract: validation, locking and close semantics shared by every backend."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal

from turnkeep.session_ids import session_id_problem
from turnkeep.storage.addresses import Value, ValueList
from turnkeep.storage.attached import AttachedKey, AttachedUpdate
from turnkeep.storage.blobs import BlobStore
from turnkeep.storage.errors import (
    StorageClosedError,
    StorageValidationError,
)
from turnkeep.storage.records import (
    CommitResult,
    Entry,
    ListElement,
    Snapshot,
    StorageStats,
    StoredValue,
)
from turnkeep.storage.scopes import SESSION_SCOPE, EphemeralScope, Scope, SessionScope
from turnkeep.storage.writes import Transaction, Write, build_transaction, validate_text

DEFAULT_LIST_LIMIT: Final = 1000
MAX_LIST_LIMIT: Final = 10000
ListOrder = Literal["asc", "desc"]


def validate_session_id(session_id: object) -> str:
    """`session_id` if it follows the session-id rule (`turnkeep.session_ids`), else
    StorageValidationError."""
    problem = session_id_problem(session_id)
    if problem is not None:
        raise StorageValidationError(problem)
    return session_id  # type: ignore[return-value]  # the rule admits only str


def normalize_limit(limit: object) -> int:
    """None → 1000; above 10000 → 10000; below 1 or not an int → rejected."""
    if limit is None:
        return DEFAULT_LIST_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise StorageValidationError(f"list limit must be an int, got {limit!r}")
    if limit < 1:
        raise StorageValidationError(f"list limit must be >= 1, got {limit}")
    return min(limit, MAX_LIST_LIMIT)


def _check_cursor(cursor: object) -> int | None:
    if cursor is None:
        return None
    if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
        raise StorageValidationError(
            f"list cursor must be an element's seq (int >= 0), got {cursor!r}"
        )
    return cursor


def now_ms() -> int:
    """Wall-clock commit timestamp in milliseconds."""
    return time.time_ns() // 1_000_000


CommitObserver = Callable[[Sequence[Write], CommitResult], None]
"""Told each committed transaction of a handle (a turn's live events: turnkeep.harness.live)."""


class Storage(ABC):
    """One session's storage. Thread-safe; every committed write gets a global sequence."""

    def __init__(self, session_id: str, *, lock: threading.RLock | None = None) -> None:
        self.session_id = validate_session_id(session_id)
        self._lock = lock if lock is not None else threading.RLock()
        self._closed = False
        self._observers: list[CommitObserver] = []

    # -- public API -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._closed

    def commit(
        self,
        writes: Sequence[Write],
        *,
        guard: Value | None = None,
        attach: AttachedUpdate | None = None,
        guard_seq: int | None = None,
    ) -> CommitResult:
        """Commit `writes` atomically as one transaction of one scope.

        With `guard` (a session-scoped value address) the commit applies only if that value
        exists at commit time, atomically with the commit; otherwise GuardFailedError is raised,
        nothing is written and no sequence is consumed. With `guard_seq` as well, the guard
        value must still be the one stored at that sequence (compare-and-set); else the same
        GuardFailedError. An empty commit does nothing.
        `attach`: another store's conditional update applied in the same transaction (only
        for session writes, and only where `attached_table()` names its table); its condition
        failing raises AttachedConditionError with nothing written.
        """
        txn = build_transaction(writes, guard, guard_seq)
        if attach is not None and (
            attach.table != self.attached_table() or not txn.is_session or not txn.writes
        ):
            raise StorageValidationError(
                f"this storage cannot attach an update of table {attach.table!r} to this commit"
            )
        with self._lock:
            self._ensure_open()
            if not txn.writes:
                return CommitResult(None, (), now_ms(), self._get_stats())
            result = self._commit(txn) if attach is None else self._commit_attached(txn, attach)
        # Outside the lock: an observer may make network calls (docs/api.md, "Live events").
        for observer in self._observers:
            observer(txn.writes, result)
        return result

    def observe(self, observer: CommitObserver) -> None:
        """Call `observer(writes, result)` after each commit of this handle (`writes` in the
        order of `result.seqs`). An observer must not raise: it runs after the commit."""
        self._observers.append(observer)

    def attached_table(self) -> str | None:
        """The table whose other items this storage can read and write with its own requests
        (`prefetch`, `commit(attach=...)`); None where nothing can be attached."""
        return None

    def prefetch(
        self,
        values: Sequence[Value] = (),
        *,
        scopes: Sequence[EphemeralScope] = (),
        attached: Sequence[AttachedKey] = (),
        head: bool = False,
        entries: Sequence[str] = (),
    ) -> dict[AttachedKey, Mapping[str, Any] | None] | None:
        """Read ahead, in as few requests as the backend allows, what the caller reads next.

        Until this handle's next commit, `get_value` of each of `values`, the first load of
        each of `scopes`, `entry_seqs` of `entries` and (with `head`) the sequence head are
        answered from this read. Returns the `attached` items (None: absent), or None where
        the backend reads nothing ahead (then the caller reads those items itself). Backends
        without request costs read nothing.
        """
        return None

    def entry_seqs(self, ids: Sequence[str]) -> dict[str, int]:
        """The sequence of each stored entry of `ids` (absent ids are left out)."""
        return {entry.id: entry.seq for entry in self.get_entries(ids)}

    def _commit_attached(self, txn: Transaction, attach: AttachedUpdate) -> CommitResult:
        raise StorageValidationError("this storage cannot attach updates to a commit")

    def blobs(self) -> BlobStore:
        """The session's blobs (attachments' bytes), stored with it and deleted with it."""
        with self._lock:
            self._ensure_open()
            return self._blobs()

    def get_value(self, address: Value) -> StoredValue | None:
        """The value at `address`, or None."""
        if not isinstance(address, Value):
            raise StorageValidationError(f"get_value needs a value(...) address, got {address!r}")
        with self._lock:
            self._ensure_open()
            return self._get_value(address)

    def scan_values(
        self, namespace: str, key_prefix: str = "", scope: Scope = SESSION_SCOPE
    ) -> list[StoredValue]:
        """Values of `namespace` in `scope` whose key starts with `key_prefix`, ordered by key."""
        validate_text(namespace, what="namespace")
        validate_text(key_prefix, what="key prefix")
        if not isinstance(scope, (SessionScope, EphemeralScope)):
            raise StorageValidationError(f"scope must be a Scope, got {scope!r}")
        with self._lock:
            self._ensure_open()
            return self._scan_values(namespace, key_prefix, scope)

    def read_list(
        self,
        address: ValueList,
        *,
        cursor: int | None = None,
        order: ListOrder = "asc",
        limit: int | None = None,
        stop_at_tag: str | None = None,
    ) -> list[ListElement]:
        """One page: after `cursor` (exclusive) in `order`, at most `limit` elements inspected,
        ending at and including the first element tagged `stop_at_tag`."""
        if not isinstance(address, ValueList):
            raise StorageValidationError(
                f"read_list needs a value_list(...) address, got {address!r}"
            )
        if order not in ("asc", "desc"):
            raise StorageValidationError(f"list order must be 'asc' or 'desc', got {order!r}")
        if stop_at_tag is not None and (not isinstance(stop_at_tag, str) or stop_at_tag == ""):
            raise StorageValidationError(
                f"stop_at_tag must be a non-empty string, got {stop_at_tag!r}"
            )
        checked_cursor = _check_cursor(cursor)
        page_limit = normalize_limit(limit)
        with self._lock:
            self._ensure_open()
            page = self._read_list(address, checked_cursor, order, page_limit)
        if stop_at_tag is not None:
            for index, element in enumerate(page):
                if element.tag == stop_at_tag:
                    return page[: index + 1]
        return page

    def get_entries(self, ids: Sequence[str]) -> list[Entry]:
        """Entries with the given ids, in the order asked; unknown ids are skipped."""
        if isinstance(ids, str) or not isinstance(ids, Sequence):
            raise StorageValidationError("get_entries takes a sequence of entry ids")
        for entry_id in ids:
            validate_text(entry_id, what="entry id")
        with self._lock:
            self._ensure_open()
            return self._get_entries(list(ids))

    def scan_entries(
        self, *, after_seq: int | None = None, limit: int | None = None
    ) -> list[Entry]:
        """Entries in sequence order after `after_seq` (exclusive), at most `limit` (None = all)."""
        checked = _check_cursor(after_seq)
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise StorageValidationError(f"entry scan limit must be an int >= 1, got {limit!r}")
        with self._lock:
            self._ensure_open()
            return self._scan_entries(checked, limit)

    def scan_branch(self, leaf_id: str) -> list[Entry]:
        """The path of entries from the root down to `leaf_id`."""
        validate_text(leaf_id, what="entry id")
        with self._lock:
            self._ensure_open()
            return self._scan_branch(leaf_id)

    def get_stats(self) -> StorageStats:
        """Entry and usage totals (immutable)."""
        with self._lock:
            self._ensure_open()
            return self._get_stats()

    def snapshot(self) -> Snapshot:
        """Session-scoped state for a fork; ephemeral state is never included."""
        with self._lock:
            self._ensure_open()
            return self._snapshot()

    def close(self) -> None:
        """Wait for admitted commits, then reject further reads and writes. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._close()

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers for backends ---------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise StorageClosedError(f"storage of session {self.session_id!r} is closed")

    def _scan_branch(self, leaf_id: str) -> list[Entry]:
        path: list[Entry] = []
        seen: set[str] = set()
        current: str | None = leaf_id
        while current is not None:
            if current in seen:
                break
            seen.add(current)
            found = self._get_entries([current])
            if not found:
                if current == leaf_id:
                    raise StorageValidationError(f"entry {leaf_id!r} does not exist")
                break
            path.append(found[0])
            current = found[0].parent_id
        path.reverse()
        return path

    # -- backend primitives -----------------------------------------------------------------

    @abstractmethod
    def _commit(self, txn: Transaction) -> CommitResult:
        """Apply a validated, non-empty transaction atomically or raise with nothing applied."""

    @abstractmethod
    def _get_value(self, address: Value) -> StoredValue | None: ...

    @abstractmethod
    def _scan_values(self, namespace: str, key_prefix: str, scope: Scope) -> list[StoredValue]: ...

    @abstractmethod
    def _read_list(
        self, address: ValueList, cursor: int | None, order: ListOrder, limit: int
    ) -> list[ListElement]:
        """At most `limit` elements after `cursor` in `order` (tags are applied by the caller)."""

    @abstractmethod
    def _get_entries(self, ids: list[str]) -> list[Entry]: ...

    @abstractmethod
    def _scan_entries(self, after_seq: int | None, limit: int | None) -> list[Entry]: ...

    @abstractmethod
    def _get_stats(self) -> StorageStats: ...

    @abstractmethod
    def _snapshot(self) -> Snapshot: ...

    @abstractmethod
    def _close(self) -> None: ...

    @abstractmethod
    def _blobs(self) -> BlobStore: ...


class Repository(ABC):
    """All sessions of one storage location (a directory, a database file, a table + bucket)."""

    @abstractmethod
    def open(self, session_id: str) -> Storage:
        """Open (creating lazily) the storage of `session_id`."""

    @abstractmethod
    def list_sessions(self) -> list[str]:
        """Ids of the sessions stored here, sorted."""

    @abstractmethod
    def delete_session(self, session_id: str) -> None:
        """Remove every record of `session_id`, scoped progress included. Absent is fine."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release shared resources."""
