"""The SQLite storage file's schema and connection: WAL mode, busy timeout, the tables created
once under the write lock, driver errors mapped to the storage's (docs/storage.md, SQLite
backend). The file may also hold other components' tables (the envelope store's)."""

from __future__ import annotations

import os
import sqlite3
from typing import Final, Literal

from turnkeep.plumbing.sqlite_wal import use_wal
from turnkeep.storage.errors import (
    StorageConflictError,
    StorageCorruptionError,
    StorageUnavailableError,
)

SCHEMA_VERSION: Final = 2
"""2: costs are integer micro-dollars; usage rows name their turn and mark estimates."""
BUSY_TIMEOUT_MS: Final = 10_000
Synchronous = Literal["NORMAL", "FULL"]

SCHEMA: Final = """
CREATE TABLE sessions(
  session_id TEXT PRIMARY KEY,
  next_seq INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  entry_count INTEGER NOT NULL DEFAULT 0,
  message_count INTEGER NOT NULL DEFAULT 0,
  usage_rows INTEGER NOT NULL DEFAULT 0,
  input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  cache_read_tokens INTEGER NOT NULL DEFAULT 0,
  cache_write_tokens INTEGER NOT NULL DEFAULT 0,
  cost_micros INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE scalar_values(
  session_id TEXT NOT NULL,
  scope_id TEXT NOT NULL,
  namespace TEXT NOT NULL,
  key TEXT NOT NULL,
  seq INTEGER NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(session_id, scope_id, namespace, key)
) WITHOUT ROWID;
CREATE TABLE list_values(
  session_id TEXT NOT NULL,
  scope_id TEXT NOT NULL,
  namespace TEXT NOT NULL,
  key TEXT NOT NULL,
  seq INTEGER NOT NULL,
  value TEXT NOT NULL,
  tag TEXT,
  PRIMARY KEY(session_id, scope_id, namespace, key, seq)
) WITHOUT ROWID;
CREATE TABLE entries(
  session_id TEXT NOT NULL,
  id TEXT NOT NULL,
  parent_id TEXT,
  type TEXT NOT NULL,
  data TEXT NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY(session_id, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX entries_by_seq ON entries(session_id, seq);
CREATE TABLE usage(
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  cache_read_tokens INTEGER NOT NULL,
  cache_write_tokens INTEGER NOT NULL,
  cost_micros INTEGER NOT NULL,
  model TEXT,
  estimated INTEGER NOT NULL DEFAULT 0,
  op_id TEXT,
  PRIMARY KEY(session_id, seq)
) WITHOUT ROWID;
"""


def map_error(exc: sqlite3.Error, path: str) -> Exception:
    """Translate a driver error into the storage's typed errors."""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return StorageConflictError(
            f"SQLite database {path!r} stayed locked by another writer for "
            f"{BUSY_TIMEOUT_MS} ms: {text}"
        )
    if isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text):
        return StorageCorruptionError(f"SQLite database {path!r} is not usable: {text}")
    return StorageUnavailableError(f"SQLite database {path!r} failed: {text}")


def connect(path: str, synchronous: Synchronous = "NORMAL") -> sqlite3.Connection:
    """Open `path` (creating the file, its directory and the schema), WAL mode, busy timeout."""
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        # isolation_level=None: the driver never opens transactions; we issue BEGIN IMMEDIATE.
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
    except (OSError, sqlite3.Error) as exc:
        raise StorageUnavailableError(f"cannot open SQLite database {path!r}: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = use_wal(conn, BUSY_TIMEOUT_MS / 1000)
        if mode.lower() != "wal":
            raise StorageUnavailableError(
                f"SQLite database {path!r} cannot use WAL journal mode (got {mode!r})"
            )
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        _ensure_schema(conn, path)
    except sqlite3.Error as exc:
        conn.close()
        raise map_error(exc, path) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _stored_version(conn: sqlite3.Connection) -> int | None:
    try:
        row = conn.execute(
            "SELECT version FROM turnkeep_schema WHERE component = 'storage'"
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    return None if row is None else int(row[0])


def _ensure_schema(conn: sqlite3.Connection, path: str) -> None:
    """Create the storage tables once; the file may also hold other components' tables."""
    version = _stored_version(conn)
    if version is None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-check under the write lock: another process may have created it meanwhile.
            version = _stored_version(conn)
            if version is None:
                _create_schema(conn, path)
                version = SCHEMA_VERSION
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    if version == 1:
        _migrate_from_1(conn)
        version = _stored_version(conn)
    if version != SCHEMA_VERSION:
        raise StorageCorruptionError(
            f"SQLite database {path!r} holds storage schema version {version}; "
            f"this turnkeep reads version {SCHEMA_VERSION}"
        )


def _create_schema(conn: sqlite3.Connection, path: str) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS turnkeep_schema("
        "component TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID"
    )
    for statement in SCHEMA.split(";"):
        if statement.strip():
            try:
                conn.execute(statement)
            except sqlite3.OperationalError as exc:
                if "already exists" not in str(exc):
                    raise
                # Plain CREATE (no IF NOT EXISTS): a foreign table of the same name is refused.
                raise StorageCorruptionError(
                    f"SQLite database {path!r} already holds a table the storage needs: {exc}"
                ) from exc
    conn.execute(
        "INSERT INTO turnkeep_schema(component, version) VALUES ('storage', ?)", (SCHEMA_VERSION,)
    )


MIGRATION_1_TO_2: Final = (
    "ALTER TABLE sessions ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0",
    "UPDATE sessions SET cost_micros = CAST(round(cost_usd * 1000000) AS INTEGER)",
    "ALTER TABLE usage ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0",
    "UPDATE usage SET cost_micros = CAST(round(cost_usd * 1000000) AS INTEGER)",
    "ALTER TABLE usage ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE usage ADD COLUMN op_id TEXT",
    # DROP COLUMN needs SQLite >= 3.35, which RETURNING already does (storage/sqlite.py).
    "ALTER TABLE usage DROP COLUMN cost_usd",
    "ALTER TABLE sessions DROP COLUMN cost_usd",
    "UPDATE turnkeep_schema SET version = 2 WHERE component = 'storage' AND version = 1",
)
"""Version 1 kept costs as REAL dollars: they become integer micro-dollars (rounded half away
from zero) and the REAL columns go."""


def _migrate_from_1(conn: sqlite3.Connection) -> None:
    """Bring a version-1 file to version 2 in one write transaction (once, whoever is first)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if _stored_version(conn) == 1:
            for statement in MIGRATION_1_TO_2:
                conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
