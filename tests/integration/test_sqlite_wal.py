"""Opening a new SQLite database while another connection holds its write lock: SQLite refuses
the switch to WAL at once (no busy wait), so the stores wait for the lock themselves."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from turnkeep.envelope.sqlite import SqliteEnvelopeStore
from turnkeep.storage import open_storage, set_value, value

HOLD_SECONDS = 0.3


@contextmanager
def write_lock_held_on_a_new_database(path: Path) -> Iterator[None]:
    """A rollback-journal database (as a first opener leaves it mid-setup) whose reserved lock
    another connection holds for HOLD_SECONDS after the block starts."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE IF NOT EXISTS first_opener (x)")
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(HOLD_SECONDS, lambda: holder.execute("ROLLBACK"))
    release.start()
    try:
        yield
    finally:
        release.join()
        holder.close()


def test_sqlite_wal_switch_without_the_wait_is_refused_at_once(tmp_path: Path) -> None:
    # The SQLite behaviour the stores work around (if this ever stops failing, the wait is moot).
    path = tmp_path / "plain.db"
    with write_lock_held_on_a_new_database(path):
        conn = sqlite3.connect(path, isolation_level=None, timeout=10)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            conn.execute("PRAGMA journal_mode = WAL")
        conn.close()


def test_storage_opened_while_another_connection_holds_the_new_database_waits_for_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "turnkeep.db"
    with write_lock_held_on_a_new_database(path):
        storage = open_storage(f"sqlite://{path}", "s1")
    storage.commit([set_value(value("k"), 1)])
    stored = storage.get_value(value("k"))
    assert stored is not None
    assert stored.value == 1
    storage.close()


def test_envelope_store_opened_while_another_connection_holds_the_new_database_waits_for_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "turnkeep.db"
    with write_lock_held_on_a_new_database(path):
        store = SqliteEnvelopeStore(str(path))
    store.create("s1", "alice")
    assert store.get("s1") is not None
    store.close()
