"""SQLite envelope store (`sqlite:///abs/file.db`): one row per session, meta as a JSON column.

Every write runs inside `BEGIN IMMEDIATE` (the database write lock), so reading `updated_at`
and the `expect` keys and writing the change is one atomic step across threads and processes.
Meta changes are field-level `json_set`/`json_remove` on the stored column, never a
read-modify-write of the whole meta in Python: a host PUT rewrites only host keys, a worker
write only the keys it names. The table may share a file with the session storage tables.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from turnkeep.envelope import keys
from turnkeep.envelope.base import (
    Clock,
    EnvelopeStore,
    RawEnvelope,
    cleared_host_keys,
    next_updated_at,
    split_patch,
)
from turnkeep.envelope.errors import (
    EnvelopeConflictError,
    EnvelopeExistsError,
    EnvelopeNotFoundError,
    EnvelopeUnavailableError,
)
from turnkeep.envelope.model import MetaScalar
from turnkeep.plumbing.sqlite_wal import use_wal

_SCHEMA = """
CREATE TABLE IF NOT EXISTS envelopes (
    session_id TEXT PRIMARY KEY,
    owner_id   TEXT NOT NULL,
    meta       TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS envelopes_by_owner ON envelopes (owner_id, created_at);
"""

# A stored meta that is not a JSON object is poison: writes start again from an empty object
# rather than failing forever on a row nobody can repair through the API.
_META_OR_EMPTY = "CASE WHEN json_valid(meta) AND json_type(meta) = 'object' THEN meta ELSE '{}' END"

_SELECT = "SELECT session_id, owner_id, created_at, updated_at, meta FROM envelopes"


def _path(key: str) -> str:
    # Keys come from the reserved set (ASCII letters only), quoted for JSON-path safety anyway.
    return f'$."{key}"'


def _raw(row: Sequence[Any]) -> RawEnvelope:
    session_id, owner_id, created_at, updated_at, meta_text = row
    try:
        meta = json.loads(meta_text) if isinstance(meta_text, str) else {}
    except ValueError:
        meta = {}
    return RawEnvelope(session_id, owner_id, created_at, updated_at, meta)


def _meta_update_sql(
    sets: dict[str, MetaScalar], removes: Sequence[str]
) -> tuple[str, list[object]]:
    expr = _META_OR_EMPTY
    params: list[object] = []
    if sets:
        expr = f"json_set({expr}, {', '.join('?, json(?)' for _ in sets)})"
        for key, value in sets.items():
            params += [_path(key), json.dumps(value)]
    if removes:
        expr = f"json_remove({expr}, {', '.join('?' for _ in removes)})"
        params += [_path(k) for k in removes]
    return expr, params


class SqliteEnvelopeStore(EnvelopeStore):
    """Envelopes in one SQLite file; a handle is safe to share between threads."""

    def __init__(self, path: str, *, clock: Clock | None = None, busy_timeout_s: float = 10.0):
        super().__init__(clock=clock)
        self.path = path
        try:
            self._conn = sqlite3.connect(
                path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            # WAL: readers never block the writer; NORMAL sync is durable across process
            # crashes (the same settings turnkeep.storage.sqlite uses).
            use_wal(self._conn, busy_timeout_s)
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise EnvelopeUnavailableError(
                f"cannot open envelope database {path!r}: {exc}"
            ) from exc
        self._lock = threading.Lock()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One `BEGIN IMMEDIATE` transaction; committed on success, rolled back on any error."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise EnvelopeUnavailableError(f"envelope database busy: {exc}") from exc
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def _read(self, sql: str, params: Sequence[object]) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise EnvelopeUnavailableError(f"envelope read failed: {exc}") from exc

    def _create(
        self, session_id: str, owner_id: str, meta: dict[str, MetaScalar], now: int
    ) -> RawEnvelope:
        try:
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO envelopes (session_id, owner_id, meta, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (session_id, owner_id, json.dumps(meta), now, now),
                )
        except sqlite3.IntegrityError as exc:
            raise EnvelopeExistsError(f"session {session_id!r} already has an envelope") from exc
        except sqlite3.Error as exc:
            raise EnvelopeUnavailableError(f"envelope create failed: {exc}") from exc
        return RawEnvelope(session_id, owner_id, now, now, dict(meta))

    def _load(self, session_id: str) -> RawEnvelope | None:
        rows = self._read(f"{_SELECT} WHERE session_id = ?", (session_id,))
        return _raw(rows[0]) if rows else None

    def _session_ids(self) -> list[str]:
        return [str(r[0]) for r in self._read("SELECT session_id FROM envelopes ORDER BY 1", ())]

    def _list_owner(self, owner_id: str) -> list[RawEnvelope]:
        return [_raw(r) for r in self._read(f"{_SELECT} WHERE owner_id = ?", (owner_id,))]

    def _apply(
        self,
        session_id: str,
        owner_id: str | None,
        sets: dict[str, MetaScalar],
        removes: Sequence[str],
        expect: dict[str, tuple[MetaScalar | None, ...]],
    ) -> RawEnvelope:
        try:
            with self._write() as conn:
                row = conn.execute(f"{_SELECT} WHERE session_id = ?", (session_id,)).fetchone()
                if row is None or (owner_id is not None and row[1] != owner_id):
                    raise EnvelopeNotFoundError(f"no envelope for session {session_id!r}")
                current = _raw(row)
                if expect and not keys.expect_holds(current.meta, expect):
                    raise EnvelopeConflictError(
                        keys.describe_conflict(session_id, current.meta, expect)
                    )
                new_updated = next_updated_at(row[3], self._now())
                expr, params = _meta_update_sql(sets, removes)
                # The updated_at guard is implied by the write lock; kept so the statement
                # states the strictly-newer rule on its own.
                cursor = conn.execute(
                    f"UPDATE envelopes SET meta = {expr}, updated_at = ?"  # nosec B608  # constant fragments, bound parameters
                    " WHERE session_id = ? AND updated_at IS ?",
                    [*params, new_updated, session_id, row[3]],
                )
                if cursor.rowcount != 1:
                    raise EnvelopeConflictError(f"session {session_id!r} changed under the lock")
                after = conn.execute(f"{_SELECT} WHERE session_id = ?", (session_id,)).fetchone()
        except sqlite3.Error as exc:
            raise EnvelopeUnavailableError(f"envelope write failed: {exc}") from exc
        return _raw(after)

    def _put_host(self, session_id: str, owner_id: str, meta: dict[str, MetaScalar]) -> RawEnvelope:
        return self._apply(
            session_id, owner_id, dict(sorted(meta.items())), cleared_host_keys(meta), {}
        )

    def _update_worker(
        self,
        session_id: str,
        patch: dict[str, MetaScalar | None],
        expect: dict[str, tuple[MetaScalar | None, ...]],
        owner_id: str | None,
    ) -> RawEnvelope:
        sets, removes = split_patch(patch)
        return self._apply(session_id, owner_id, sets, removes, expect)

    def _delete(self, session_id: str) -> None:
        try:
            with self._write() as conn:
                conn.execute("DELETE FROM envelopes WHERE session_id = ?", (session_id,))
        except sqlite3.Error as exc:
            raise EnvelopeUnavailableError(f"envelope delete failed: {exc}") from exc

    def _close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- test hook ------------------------------------------------------------------------------

    def poke_raw(self, session_id: str, key: str, value: object) -> None:
        """Store `value` under `key` bypassing validation (tests plant poison with it)."""
        with self._write() as conn:
            conn.execute(
                "UPDATE envelopes SET meta = json_set(meta, ?, json(?)) WHERE session_id = ?",
                (_path(key), json.dumps(value), session_id),
            )
