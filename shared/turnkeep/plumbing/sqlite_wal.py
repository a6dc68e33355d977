"""Switching a SQLite database to WAL journal mode when other connections may be opening it.

Converting a rollback-journal database (a new file) needs an exclusive lock, and SQLite answers
`database is locked` at once, without calling the busy handler, when another connection holds a
reserved lock or is converting too: two processes or threads opening a new database together.
So the switch is retried here for as long as the busy timeout would have waited.
"""

from __future__ import annotations

import random
import sqlite3
import time


def use_wal(conn: sqlite3.Connection, timeout_s: float) -> str:
    """Set `journal_mode = WAL` on `conn`, waiting up to `timeout_s` for a lock held by another
    connection; returns the journal mode SQLite reports. Raises the last sqlite3 error after."""
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() >= deadline:
                raise
        jitter = random.uniform(0.5, 1.0)  # nosec B311  # spreads retries, not a secret
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())) * jitter)
        pause = min(pause * 2, 0.1)
