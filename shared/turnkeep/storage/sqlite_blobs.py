"""SQLite sessions' blobs: a table of the storage file, its own component in `turnkeep_schema`
(so the storage schema's version is untouched), deleted pages overwritten (`secure_delete`)
and the WAL checkpointed, so a deleted attachment's bytes stay readable in neither the database
nor its WAL (docs/storage.md "Blobs")."""

from __future__ import annotations

import sqlite3
import threading
from typing import Final

from turnkeep.storage.blobs import BlobStore
from turnkeep.storage.sqlite_schema import map_error

BLOBS_COMPONENT: Final = "attachments"
BLOBS_VERSION: Final = 1

_CREATE: Final = (
    "CREATE TABLE IF NOT EXISTS attachment_blobs("
    "session_id TEXT NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL, "
    "PRIMARY KEY(session_id, name)) WITHOUT ROWID"
)


def ensure_blob_table(conn: sqlite3.Connection) -> None:
    """Create the blob table once (idempotent) and turn on `secure_delete` for `conn`."""
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute(_CREATE)
    conn.execute(
        "INSERT OR IGNORE INTO turnkeep_schema(component, version) VALUES (?, ?)",
        (BLOBS_COMPONENT, BLOBS_VERSION),
    )


def scrub(conn: sqlite3.Connection) -> None:
    """Copy the WAL into the database and truncate it: the deleted pages (zeroed by
    `secure_delete`) replace the old ones, and no WAL frame keeps the old bytes. Readers on
    other connections can hold the checkpoint back; it completes at their next one."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def delete_session_blobs(conn: sqlite3.Connection, session_id: str) -> None:
    """Delete every blob of `session_id` (inside the caller's transaction)."""
    ensure_blob_table(conn)
    conn.execute("DELETE FROM attachment_blobs WHERE session_id = ?", (session_id,))


class SqliteBlobs(BlobStore):
    """Blobs of one session in the storage's SQLite file (the handle's connection and lock)."""

    def __init__(
        self, conn: sqlite3.Connection, lock: threading.RLock, path: str, session_id: str
    ) -> None:
        self._conn = conn
        self._lock = lock
        self._path = path
        self._sid = session_id
        self._ready = False

    def _run(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        with self._lock:
            try:
                if not self._ready:
                    ensure_blob_table(self._conn)
                    self._ready = True
                return list(self._conn.execute(sql, params).fetchall())
            except sqlite3.Error as exc:
                raise map_error(exc, self._path) from exc

    def _put(self, name: str, data: bytes) -> None:
        self._run(
            "INSERT OR REPLACE INTO attachment_blobs(session_id, name, data) VALUES (?, ?, ?)",
            (self._sid, name, data),
        )

    def _get(self, name: str) -> bytes | None:
        rows = self._run(
            "SELECT data FROM attachment_blobs WHERE session_id = ? AND name = ?",
            (self._sid, name),
        )
        if not rows:
            return None
        data = rows[0][0]
        assert isinstance(data, bytes)  # a BLOB column: the driver returns bytes
        return data

    def _names(self) -> list[str]:
        rows = self._run("SELECT name FROM attachment_blobs WHERE session_id = ?", (self._sid,))
        return [str(row[0]) for row in rows]

    def _delete(self, name: str) -> None:
        self._run(
            "DELETE FROM attachment_blobs WHERE session_id = ? AND name = ?", (self._sid, name)
        )
        with self._lock:
            try:
                scrub(self._conn)
            except sqlite3.Error as exc:
                raise map_error(exc, self._path) from exc
