"""sqlite:///abs/file.db — many sessions in one SQLite file (docs/storage.md, SQLite backend).

Schema (`storage/sqlite_schema.py`): `sessions` (next_seq + stats totals per session),
`scalar_values` and `list_values` (WITHOUT ROWID, primary keys lead with session_id, scope_id;
scope_id '' is the session scope),
`entries` and `usage`; its version is the row 'storage' of `turnkeep_schema`, so the file may
also hold other components' tables (the envelope store's). Every commit is one
`BEGIN IMMEDIATE` transaction that allocates its sequences from `sessions.next_seq`
(`UPDATE ... RETURNING`) and applies every write, retirement included
(`DELETE ... WHERE session_id=? AND scope_id=?`), or rolls back as a whole.

Durability: `journal_mode=WAL` with `synchronous=NORMAL` by default — a returned commit survives
a crash of the process, but the last commits before an OS crash or power loss may be lost (WAL
is synced at checkpoints only); the database is never corrupted. `?synchronous=full` in the URL
syncs the WAL on every commit instead (slower, survives power loss).

Concurrency: a handle owns one connection and serializes its calls with the base-class lock, so
threads may share a handle. Several handles or processes may use one file: `BEGIN IMMEDIATE`
takes SQLite's single write lock, `busy_timeout` waits for it, and the sequence is read and
advanced inside that lock, so no two writers share a sequence. Openers of a new file wait for
each other's switch to WAL (`plumbing/sqlite_wal.py`: SQLite refuses it at once, not after
`busy_timeout`).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import groupby
from typing import Final, TypeVar, assert_never
from urllib.parse import SplitResult, parse_qs

from turnkeep.storage.addresses import Value, ValueList
from turnkeep.storage.base import ListOrder, Repository, Storage, now_ms, validate_session_id
from turnkeep.storage.errors import (
    StorageValidationError,
)
from turnkeep.storage.factory import path_from_url
from turnkeep.storage.jsonvalue import load_json
from turnkeep.storage.records import (
    CommitResult,
    Entry,
    ListElement,
    Snapshot,
    StorageStats,
    StoredValue,
)
from turnkeep.storage.refusals import duplicate_entry, guard_failed, missing_parent
from turnkeep.storage.scopes import SESSION_SCOPE, Scope, scope_key
from turnkeep.storage.sqlite_schema import Synchronous, connect, map_error
from turnkeep.storage.writes import (
    AppendList,
    DeleteList,
    DeleteValue,
    InsertEntry,
    InsertUsage,
    RetireScope,
    SetValue,
    Transaction,
    UsageRow,
    Write,
    missing_parents,
)

_W = TypeVar("_W", bound=Write)

_STATS_COLUMNS: Final = (
    "entry_count, message_count, usage_rows, input_tokens, output_tokens, "
    "cache_read_tokens, cache_write_tokens, cost_micros"
)
_SEQ_MAX: Final = 2**63 - 1
# SQLite's default limit on bound parameters is 999 on old builds; stay well below it.
_CHUNK: Final = 500

_SQL_SESSION: Final = f"SELECT next_seq, {_STATS_COLUMNS} FROM sessions WHERE session_id = ?"  # nosec B608  # constant fragments, bound parameters
# Allocation and the stats read are one statement (RETURNING needs SQLite >= 3.35).
_SQL_ALLOCATE: Final = (
    f"UPDATE sessions SET next_seq = next_seq + ? WHERE session_id = ? "  # nosec B608  # constant fragments, bound parameters
    f"RETURNING next_seq, {_STATS_COLUMNS}"
)
_SQL_NEW_SESSION: Final = "INSERT INTO sessions(session_id, next_seq, created_at) VALUES (?, ?, ?)"
_SQL_STATS: Final = (
    "UPDATE sessions SET entry_count = ?, message_count = ?, usage_rows = ?, "
    "input_tokens = ?, output_tokens = ?, cache_read_tokens = ?, cache_write_tokens = ?, "
    "cost_micros = ? WHERE session_id = ?"
)
_SQL_SET: Final = (
    "INSERT OR REPLACE INTO scalar_values(session_id, scope_id, namespace, key, seq, value) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_SQL_DELETE_VALUE: Final = (
    "DELETE FROM scalar_values WHERE session_id = ? AND scope_id = ? AND namespace = ? AND key = ?"
)
_SQL_APPEND: Final = (
    "INSERT INTO list_values(session_id, scope_id, namespace, key, seq, value, tag) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_SQL_DELETE_LIST: Final = (
    "DELETE FROM list_values WHERE session_id = ? AND scope_id = ? AND namespace = ? AND key = ?"
)
_SQL_RETIRE_VALUES: Final = "DELETE FROM scalar_values WHERE session_id = ? AND scope_id = ?"
_SQL_RETIRE_LISTS: Final = "DELETE FROM list_values WHERE session_id = ? AND scope_id = ?"
_SQL_INSERT_ENTRY: Final = (
    "INSERT INTO entries(session_id, id, parent_id, type, data, seq) VALUES (?, ?, ?, ?, ?, ?)"
)
_SQL_INSERT_USAGE: Final = (
    "INSERT INTO usage(session_id, seq, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, cost_micros, model, estimated, op_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SQL_GET_VALUE: Final = (
    "SELECT value, seq FROM scalar_values "
    "WHERE session_id = ? AND scope_id = ? AND namespace = ? AND key = ?"
)
_SQL_SCAN_VALUES: Final = (
    "SELECT key, value, seq FROM scalar_values "
    "WHERE session_id = ? AND scope_id = ? AND namespace = ? AND key >= ? "
    "AND substr(key, 1, ?) = ? ORDER BY key"
)
LIST_PAGE_SQL: Final[dict[str, str]] = {
    "asc": (
        "SELECT seq, value, tag FROM list_values WHERE session_id = ? AND scope_id = ? "
        "AND namespace = ? AND key = ? AND seq > ? ORDER BY seq ASC LIMIT ?"
    ),
    "desc": (
        "SELECT seq, value, tag FROM list_values WHERE session_id = ? AND scope_id = ? "
        "AND namespace = ? AND key = ? AND seq < ? ORDER BY seq DESC LIMIT ?"
    ),
}
"""The list page queries; public so tests can check their plan (primary key, no temp sort)."""
_ENTRY_COLUMNS: Final = "id, parent_id, type, data, seq"


def _stats_from_row(row: Sequence[object]) -> StorageStats:
    counts = [int(x) for x in row[:8]]  # type: ignore[call-overload]
    return StorageStats(
        entry_count=counts[0],
        message_count=counts[1],
        usage_rows=counts[2],
        input_tokens=counts[3],
        output_tokens=counts[4],
        cache_read_tokens=counts[5],
        cache_write_tokens=counts[6],
        cost_micros=counts[7],
    )


def _stats_params(stats: StorageStats) -> tuple[int, ...]:
    return (
        stats.entry_count,
        stats.message_count,
        stats.usage_rows,
        stats.input_tokens,
        stats.output_tokens,
        stats.cache_read_tokens,
        stats.cache_write_tokens,
        stats.cost_micros,
    )


def _entry(row: Sequence[object]) -> Entry:
    entry_id, parent_id, entry_type, data, seq = row
    return Entry(
        str(entry_id),
        None if parent_id is None else str(parent_id),
        str(entry_type),
        load_json(str(data)),
        int(seq),  # type: ignore[call-overload]
    )


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


class SqliteStorage(Storage):
    """One session in a SQLite file; the handle owns its connection."""

    def __init__(self, path: str, session_id: str, synchronous: Synchronous = "NORMAL") -> None:
        super().__init__(session_id)
        self.path = path
        self._conn = connect(path, synchronous)

    # -- writes ---------------------------------------------------------------------------------

    @contextmanager
    def _write_transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise map_error(exc, self.path) from exc
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise map_error(exc, self.path) from exc
            raise

    def _commit(self, txn: Transaction) -> CommitResult:
        sid = self.session_id
        count = len(txn.writes)
        with self._write_transaction() as conn:
            rows = conn.execute(_SQL_ALLOCATE, (count, sid)).fetchall()
            if rows:
                first, stats = int(rows[0][0]) - count, _stats_from_row(rows[0][1:])
            else:
                conn.execute(_SQL_NEW_SESSION, (sid, 1 + count, now_ms()))
                first, stats = 1, StorageStats()
            if txn.guard is not None and not self._guard_holds(conn, txn.guard, txn.guard_seq):
                raise guard_failed(txn.guard, txn.guard_seq)
            if txn.entry_ids:
                self._check_entries(conn, txn)
            seqs = tuple(range(first, first + count))
            new_stats = self._apply(conn, txn, seqs, stats)
            if new_stats is not stats:
                conn.execute(_SQL_STATS, (*_stats_params(new_stats), sid))
        return CommitResult(first, seqs, now_ms(), new_stats)

    def _guard_holds(self, conn: sqlite3.Connection, guard: Value, seq: int | None) -> bool:
        row = conn.execute(
            "SELECT seq FROM scalar_values"
            " WHERE session_id = ? AND scope_id = '' AND namespace = ? AND key = ?",
            (self.session_id, guard.namespace, guard.key),
        ).fetchone()
        return row is not None and (seq is None or row[0] == seq)

    def _check_entries(self, conn: sqlite3.Connection, txn: Transaction) -> None:
        duplicates = self._existing_entry_ids(conn, txn.entry_ids)
        for entry_id in txn.entry_ids:
            if entry_id in duplicates:
                raise duplicate_entry(entry_id)
        wanted = sorted(
            {w.parent_id for w in txn.writes if isinstance(w, InsertEntry) and w.parent_id}
            - set(txn.entry_ids)
        )
        missing = missing_parents(txn, self._existing_entry_ids(conn, wanted))
        if missing:
            raise missing_parent(*missing[0])

    def _existing_entry_ids(self, conn: sqlite3.Connection, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT id FROM entries WHERE session_id = ? AND id IN ({marks})",  # nosec B608  # constant fragments, bound parameters
                (self.session_id, *chunk),
            )
            found.update(str(r[0]) for r in rows)
        return found

    def _apply(
        self,
        conn: sqlite3.Connection,
        txn: Transaction,
        seqs: tuple[int, ...],
        stats: StorageStats,
    ) -> StorageStats:
        """Apply the writes in order; runs of one write kind go to the driver as one batch."""
        sid = self.session_id
        pairs: Iterable[tuple[Write, int]] = zip(txn.writes, seqs, strict=True)
        for _, run in groupby(pairs, key=lambda pair: type(pair[0])):
            batch = list(run)
            first = batch[0][0]
            match first:
                case SetValue():
                    conn.executemany(
                        _SQL_SET,
                        [
                            (*_row_key(sid, w.address), s, w.value_json)
                            for w, s in _typed(batch, SetValue)
                        ],
                    )
                case DeleteValue():
                    conn.executemany(
                        _SQL_DELETE_VALUE,
                        [_row_key(sid, w.address) for w, _ in _typed(batch, DeleteValue)],
                    )
                case AppendList():
                    conn.executemany(
                        _SQL_APPEND,
                        [
                            (*_row_key(sid, w.address), s, w.element_json, w.tag)
                            for w, s in _typed(batch, AppendList)
                        ],
                    )
                case DeleteList():
                    conn.executemany(
                        _SQL_DELETE_LIST,
                        [_row_key(sid, w.address) for w, _ in _typed(batch, DeleteList)],
                    )
                case RetireScope():
                    for retirement, _ in _typed(batch, RetireScope):
                        self._retire(conn, retirement.scope.id)
                case InsertEntry():
                    entries = _typed(batch, InsertEntry)
                    conn.executemany(
                        _SQL_INSERT_ENTRY,
                        [(sid, e.id, e.parent_id, e.type, e.data_json, s) for e, s in entries],
                    )
                    for entry, _ in entries:
                        stats = stats.with_entry(entry.type)
                case InsertUsage():
                    rows = _typed(batch, InsertUsage)
                    conn.executemany(_SQL_INSERT_USAGE, [_usage_params(sid, u, s) for u, s in rows])
                    for usage, _ in rows:
                        stats = stats.with_usage(usage.row)
                case _:
                    assert_never(first)
        return stats

    def _retire(self, conn: sqlite3.Connection, scope_id: str) -> None:
        """Delete every value and list of one ephemeral scope (inside the commit)."""
        conn.execute(_SQL_RETIRE_VALUES, (self.session_id, scope_id))
        conn.execute(_SQL_RETIRE_LISTS, (self.session_id, scope_id))

    # -- reads ----------------------------------------------------------------------------------

    def _query(self, sql: str, params: Sequence[object]) -> list[tuple[object, ...]]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise map_error(exc, self.path) from exc

    def _get_value(self, address: Value) -> StoredValue | None:
        rows = self._query(_SQL_GET_VALUE, _row_key(self.session_id, address))
        if not rows:
            return None
        text, seq = rows[0]
        return StoredValue(address, load_json(str(text)), int(seq))  # type: ignore[call-overload]

    def _scan_values(self, namespace: str, key_prefix: str, scope: Scope) -> list[StoredValue]:
        rows = self._query(
            _SQL_SCAN_VALUES,
            (self.session_id, scope_key(scope), namespace, key_prefix, len(key_prefix), key_prefix),
        )
        return [
            StoredValue(Value(namespace, str(key), scope), load_json(str(text)), int(seq))  # type: ignore[call-overload]
            for key, text, seq in rows
        ]

    def _read_list(
        self, address: ValueList, cursor: int | None, order: ListOrder, limit: int
    ) -> list[ListElement]:
        if cursor is None:
            cursor = -1 if order == "asc" else _SEQ_MAX
        rows = self._query(
            LIST_PAGE_SQL[order],
            (*_row_key(self.session_id, address), min(cursor, _SEQ_MAX), limit),
        )
        return [
            ListElement(int(seq), load_json(str(text)), None if tag is None else str(tag))  # type: ignore[call-overload]
            for seq, text, tag in rows
        ]

    def _get_entries(self, ids: list[str]) -> list[Entry]:
        found: dict[str, Entry] = {}
        unique = list(dict.fromkeys(ids))
        for chunk in _chunks(unique):
            marks = ",".join("?" * len(chunk))
            for row in self._query(
                f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND id IN ({marks})",  # nosec B608  # constant fragments, bound parameters
                (self.session_id, *chunk),
            ):
                entry = _entry(row)
                found[entry.id] = entry
        return [found[i] for i in ids if i in found]

    def _scan_entries(self, after_seq: int | None, limit: int | None) -> list[Entry]:
        rows = self._query(
            f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND seq > ? "  # nosec B608  # constant fragments, bound parameters
            "ORDER BY seq LIMIT ?",
            (self.session_id, -1 if after_seq is None else min(after_seq, _SEQ_MAX), limit or -1),
        )
        return [_entry(row) for row in rows]

    def _get_stats(self) -> StorageStats:
        rows = self._query(_SQL_SESSION, (self.session_id,))
        return _stats_from_row(rows[0][1:]) if rows else StorageStats()

    def _snapshot(self) -> Snapshot:
        sid = self.session_id
        # One read transaction so the snapshot is consistent across the tables.
        self._query("BEGIN", ())
        try:
            values = tuple(
                StoredValue(Value(str(ns), str(key), SESSION_SCOPE), load_json(str(text)), int(seq))  # type: ignore[call-overload]
                for ns, key, text, seq in self._query(
                    "SELECT namespace, key, value, seq FROM scalar_values "
                    "WHERE session_id = ? AND scope_id = '' ORDER BY namespace, key",
                    (sid,),
                )
            )
            list_rows = self._query(
                "SELECT namespace, key, seq, value, tag FROM list_values "
                "WHERE session_id = ? AND scope_id = '' ORDER BY namespace, key, seq",
                (sid,),
            )
            entries = tuple(
                _entry(row)
                for row in self._query(
                    f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE session_id = ? ORDER BY seq",  # nosec B608  # constant fragments, bound parameters
                    (sid,),
                )
            )
            usage = tuple(
                UsageRow(
                    int(r[0]),  # type: ignore[call-overload]
                    int(r[1]),  # type: ignore[call-overload]
                    int(r[2]),  # type: ignore[call-overload]
                    int(r[3]),  # type: ignore[call-overload]
                    int(r[4]),  # type: ignore[call-overload]
                    None if r[5] is None else str(r[5]),
                    bool(r[6]),
                    None if r[7] is None else str(r[7]),
                )
                for r in self._query(
                    "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, "
                    "cost_micros, model, estimated, op_id FROM usage WHERE session_id = ? "
                    "ORDER BY seq",
                    (sid,),
                )
            )
        finally:
            self._query("COMMIT", ())
        lists = tuple(
            (
                ValueList(str(ns), str(key), SESSION_SCOPE),
                tuple(
                    ListElement(int(seq), load_json(str(text)), None if tag is None else str(tag))  # type: ignore[call-overload]
                    for _, _, seq, text, tag in group
                ),
            )
            for (ns, key), group in groupby(list_rows, key=lambda r: (r[0], r[1]))
        )
        return Snapshot(values, lists, entries, usage)

    def _close(self) -> None:
        """Commits run synchronously under the handle lock, so none is in flight here."""
        self._conn.close()


def _row_key(session_id: str, address: Value | ValueList) -> tuple[str, str, str, str]:
    """(session_id, scope_id, namespace, key): the primary-key prefix of value and list rows."""
    return (session_id, scope_key(address.scope), address.namespace, address.key)


def _usage_params(session_id: str, usage: InsertUsage, seq: int) -> tuple[object, ...]:
    """Parameters of _SQL_INSERT_USAGE for one row."""
    row = usage.row
    return (
        session_id,
        seq,
        row.input_tokens,
        row.output_tokens,
        row.cache_read_tokens,
        row.cache_write_tokens,
        row.cost_micros,
        row.model,
        int(row.estimated),
        row.op_id,
    )


def _typed(batch: list[tuple[Write, int]], kind: type[_W]) -> list[tuple[_W, int]]:
    """The batch narrowed to `kind` (groupby already made it homogeneous)."""
    return [(w, s) for w, s in batch if isinstance(w, kind)]


class SqliteRepository(Repository):
    """Every session in one SQLite file."""

    def __init__(self, path: str, synchronous: Synchronous = "NORMAL") -> None:
        self.path = path
        self._synchronous: Synchronous = synchronous
        self._conn = connect(path, synchronous)
        self._lock = threading.Lock()

    def open(self, session_id: str) -> SqliteStorage:
        return SqliteStorage(self.path, session_id, self._synchronous)

    def list_sessions(self) -> list[str]:
        with self._lock:
            try:
                rows = self._conn.execute(
                    "SELECT session_id FROM sessions ORDER BY session_id"
                ).fetchall()
            except sqlite3.Error as exc:
                raise map_error(exc, self.path) from exc
        return [str(r[0]) for r in rows]

    def delete_session(self, session_id: str) -> None:
        validate_session_id(session_id)
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for table in ("scalar_values", "list_values", "entries", "usage", "sessions"):
                        conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))  # nosec B608  # constant fragments, bound parameters
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise map_error(exc, self.path) from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _options(parts: SplitResult) -> tuple[str, Synchronous]:
    path = path_from_url(parts, what="sqlite")
    synchronous: Synchronous = "NORMAL"
    for name, values in parse_qs(parts.query, keep_blank_values=True).items():
        if name != "synchronous":
            raise StorageValidationError(
                f"sqlite URL option {name!r} is unknown; the only option is synchronous"
            )
        choice = values[-1].upper()
        if choice not in ("NORMAL", "FULL"):
            raise StorageValidationError(
                f"sqlite URL option synchronous={values[-1]!r} must be 'normal' or 'full'"
            )
        synchronous = "FULL" if choice == "FULL" else "NORMAL"
    return path, synchronous


def repository_from_url(parts: SplitResult) -> SqliteRepository:
    """The repository of every session in the file `sqlite:///abs/file.db[?synchronous=full]`."""
    path, synchronous = _options(parts)
    return SqliteRepository(path, synchronous)


def storage_from_url(parts: SplitResult, session_id: str) -> SqliteStorage:
    """A handle on `session_id` in the file named by the URL; it owns its connection."""
    validate_session_id(session_id)
    path, synchronous = _options(parts)
    return SqliteStorage(path, session_id, synchronous)


__all__ = [
    "LIST_PAGE_SQL",
    "SqliteRepository",
    "SqliteStorage",
    "connect",
    "repository_from_url",
    "storage_from_url",
]
