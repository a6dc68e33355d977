"""SQLite backend specifics (docs/storage.md): schema, atomic retirement, plans, sharing."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from turnkeep.storage import (
    StorageConflictError,
    StorageCorruptionError,
    StorageError,
    StorageValidationError,
    append_list,
    ephemeral_scope,
    insert_entry,
    open_repository,
    open_storage,
    retire_scope,
    set_value,
    value,
    value_list,
)
from turnkeep.storage.sqlite import LIST_PAGE_SQL, SqliteStorage

SCOPE = ephemeral_scope("op-1")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "turnkeep.db"


@pytest.fixture
def raw(db: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection for looking at rows behind the storage's back."""
    open_storage(f"sqlite://{db}", "s0").close()  # creates the schema
    conn = sqlite3.connect(db)
    yield conn
    conn.close()


def _open(db: Path, session_id: str = "s1") -> SqliteStorage:
    storage = open_storage(f"sqlite://{db}", session_id)
    assert isinstance(storage, SqliteStorage)
    return storage


def _count(raw: sqlite3.Connection, table: str, session_id: str, scope_id: str | None) -> int:
    params: tuple[str, ...]
    if scope_id is None:
        sql, params = f"SELECT count(*) FROM {table} WHERE session_id = ?", (session_id,)
    else:
        sql = f"SELECT count(*) FROM {table} WHERE session_id = ? AND scope_id = ?"
        params = (session_id, scope_id)
    return int(raw.execute(sql, params).fetchone()[0])


def _next_seq(raw: sqlite3.Connection, session_id: str = "s1") -> int:
    return int(
        raw.execute("SELECT next_seq FROM sessions WHERE session_id = ?", (session_id,)).fetchone()[
            0
        ]
    )


def _fill_scope(storage: SqliteStorage) -> None:
    storage.commit(
        [
            set_value(value("memo", "a", SCOPE), 1),
            append_list(value_list("frames", "r", SCOPE), "f1"),
            append_list(value_list("frames", "r", SCOPE), "f2", tag="end"),
        ]
    )


# -- schema ----------------------------------------------------------------------------------


def test_value_tables_key_rows_by_session_scope_namespace_and_key(raw: sqlite3.Connection) -> None:
    def primary_key(table: str) -> list[str]:
        rows = raw.execute(f"PRAGMA table_info({table})").fetchall()
        return [r[1] for r in sorted((r for r in rows if r[5]), key=lambda r: r[5])]

    assert primary_key("scalar_values") == ["session_id", "scope_id", "namespace", "key"]
    assert primary_key("list_values") == ["session_id", "scope_id", "namespace", "key", "seq"]
    for table in ("scalar_values", "list_values"):
        sql = raw.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        assert "WITHOUT ROWID" in sql


def test_list_tag_column_is_nullable_and_rows_keep_null_or_the_tag(
    db: Path, raw: sqlite3.Connection
) -> None:
    tag_column = [r for r in raw.execute("PRAGMA table_info(list_values)") if r[1] == "tag"]
    assert tag_column[0][3] == 0  # notnull flag
    storage = _open(db)
    _fill_scope(storage)
    rows = raw.execute("SELECT value, tag FROM list_values ORDER BY seq").fetchall()
    assert rows == [('"f1"', None), ('"f2"', "end")]


def test_session_scope_rows_use_the_empty_scope_id(db: Path, raw: sqlite3.Connection) -> None:
    storage = _open(db)
    storage.commit([set_value(value("ns", "k"), 1), append_list(value_list("ns", "k"), 2)])
    _fill_scope(storage)
    assert _count(raw, "scalar_values", "s1", "") == 1
    assert _count(raw, "list_values", "s1", "") == 1
    assert _count(raw, "scalar_values", "s1", "op-1") == 1
    assert _count(raw, "list_values", "s1", "op-1") == 2


def test_database_runs_in_wal_mode_with_synchronous_normal_by_default(db: Path) -> None:
    storage = _open(db)
    conn = storage._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_url_option_synchronous_full_syncs_every_commit(db: Path) -> None:
    storage = open_storage(f"sqlite://{db}?synchronous=full", "s1")
    assert isinstance(storage, SqliteStorage)
    assert storage._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


@pytest.mark.parametrize(
    ("url", "word"),
    [
        ("sqlite://relative.db", "absolute"),
        ("sqlite:///tmp/x.db?journal=off", "journal"),
        ("sqlite:///tmp/x.db?synchronous=off", "synchronous"),
    ],
)
def test_bad_sqlite_urls_are_rejected_naming_the_problem(url: str, word: str) -> None:
    with pytest.raises(StorageValidationError, match=word):
        open_storage(url, "s1")


def test_a_file_that_is_not_a_database_fails_to_open_as_corruption(tmp_path: Path) -> None:
    path = tmp_path / "not.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StorageCorruptionError, match=r"not\.db"):
        open_storage(f"sqlite://{path}", "s1")


def test_a_newer_schema_version_is_refused(db: Path, raw: sqlite3.Connection) -> None:
    raw.execute("UPDATE turnkeep_schema SET version = 99 WHERE component = 'storage'")
    raw.commit()
    with pytest.raises(StorageCorruptionError, match="version 99"):
        open_storage(f"sqlite://{db}", "s1")


def test_the_file_may_hold_other_components_tables(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE envelopes(session_id TEXT PRIMARY KEY, meta TEXT)")
    conn.execute("INSERT INTO envelopes VALUES ('s1', '{}')")
    conn.commit()
    conn.close()
    storage = _open(db)
    storage.commit([set_value(value("x"), 1)])
    assert _open(db).get_value(value("x")) is not None


def test_a_foreign_table_with_a_storage_table_name_is_refused(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE entries(whatever TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StorageCorruptionError, match="entries"):
        open_storage(f"sqlite://{db}", "s1")


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "turnkeep.db"
    open_storage(f"sqlite://{path}", "s1").commit([set_value(value("x"), 1)])
    assert path.exists()


# -- retirement ------------------------------------------------------------------------------


def test_retirement_deletes_the_scoped_rows_in_the_commit_that_writes_terminal_state(
    db: Path, raw: sqlite3.Connection
) -> None:
    storage = _open(db)
    _fill_scope(storage)
    storage.commit([set_value(value("op.state", "op-1"), "done"), retire_scope(SCOPE)])
    assert _count(raw, "scalar_values", "s1", "op-1") == 0
    assert _count(raw, "list_values", "s1", "op-1") == 0
    assert _count(raw, "scalar_values", "s1", "") == 1


def test_failure_after_the_scope_deletion_rolls_back_deletion_and_siblings(
    db: Path, raw: sqlite3.Connection
) -> None:
    storage = _open(db)
    _fill_scope(storage)
    storage.commit([insert_entry("root", None, "message")])
    next_seq = _next_seq(raw)
    # The trigger fires on the last write, after the retirement's DELETEs already ran.
    raw.execute(
        "CREATE TRIGGER fail_boom BEFORE INSERT ON entries WHEN NEW.id = 'boom' "
        "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
    )
    raw.commit()
    with pytest.raises(StorageError, match="injected failure"):
        storage.commit(
            [
                retire_scope(SCOPE),
                set_value(value("op.state", "op-1"), "done"),
                append_list(value_list("events"), "finished"),
                insert_entry("boom", "root", "message"),
            ]
        )
    assert _count(raw, "scalar_values", "s1", "op-1") == 1
    assert _count(raw, "list_values", "s1", "op-1") == 2
    assert _count(raw, "scalar_values", "s1", "") == 0
    assert _count(raw, "list_values", "s1", "") == 0
    assert _next_seq(raw) == next_seq
    assert [e.value for e in storage.read_list(value_list("frames", "r", SCOPE))] == ["f1", "f2"]
    assert storage.get_stats().entry_count == 1
    ok = storage.commit([set_value(value("after"), 1)])
    assert ok.first_seq == next_seq


def test_error_raised_inside_the_retirement_step_rolls_back_its_deletes(
    db: Path, raw: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = _open(db)
    _fill_scope(storage)
    real_retire = SqliteStorage._retire

    def retire_then_crash(self: SqliteStorage, conn: sqlite3.Connection, scope_id: str) -> None:
        real_retire(self, conn, scope_id)
        raise RuntimeError("crash after the scope deletion")

    monkeypatch.setattr(SqliteStorage, "_retire", retire_then_crash)
    with pytest.raises(RuntimeError, match="crash after"):
        storage.commit([set_value(value("op.state"), "done"), retire_scope(SCOPE)])
    monkeypatch.undo()
    assert _count(raw, "scalar_values", "s1", "op-1") == 1
    assert _count(raw, "list_values", "s1", "op-1") == 2
    assert storage.get_value(value("op.state")) is None
    storage.commit([retire_scope(SCOPE)])  # the handle is still usable
    assert _count(raw, "list_values", "s1", "op-1") == 0


def test_reuse_after_retirement_recreates_rows_under_the_same_scope_id(
    db: Path, raw: sqlite3.Connection
) -> None:
    storage = _open(db)
    _fill_scope(storage)
    retired = storage.commit([retire_scope(SCOPE)])
    storage.commit([append_list(value_list("frames", "r", SCOPE), "new")])
    rows = raw.execute(
        "SELECT scope_id, seq, value FROM list_values WHERE session_id = 's1'"
    ).fetchall()
    assert len(rows) == 1
    assert rows[0][0] == "op-1"
    assert rows[0][1] > retired.seqs[0]


def test_next_seq_advances_for_retirement_though_no_row_records_it(
    db: Path, raw: sqlite3.Connection
) -> None:
    storage = _open(db)
    storage.commit([set_value(value("x"), 1)])
    before = _next_seq(raw)
    result = storage.commit([retire_scope(SCOPE), retire_scope(ephemeral_scope("never"))])
    assert result.seqs == (before, before + 1)
    assert _next_seq(raw) == before + 2


# -- query plans -----------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_list_page_query_uses_the_scoped_primary_key_without_a_temp_sort(
    raw: sqlite3.Connection, order: str
) -> None:
    plan = raw.execute(
        f"EXPLAIN QUERY PLAN {LIST_PAGE_SQL[order]}", ("s1", "op-1", "ns", "k", 0, 10)
    ).fetchall()
    details = " | ".join(str(row[-1]) for row in plan)
    assert "USING PRIMARY KEY (session_id=? AND scope_id=? AND namespace=? AND key=?" in details
    assert "TEMP B-TREE" not in details
    assert "SCAN" not in details


# -- several sessions, handles and processes in one file ---------------------------------------


def test_two_sessions_in_one_file_keep_values_scopes_and_sequences_apart(db: Path) -> None:
    one, two = _open(db, "s1"), _open(db, "s2")
    one.commit([set_value(value("x"), "one")])
    _fill_scope(one)
    first_two = two.commit([set_value(value("x"), "two")])
    _fill_scope(two)
    assert first_two.first_seq == 1
    one.commit([retire_scope(SCOPE)])
    assert one.read_list(value_list("frames", "r", SCOPE)) == []
    assert [e.value for e in two.read_list(value_list("frames", "r", SCOPE))] == ["f1", "f2"]
    stored = two.get_value(value("x"))
    assert stored is not None
    assert stored.value == "two"


def test_two_handles_on_one_session_share_one_sequence(db: Path) -> None:
    a, b = _open(db), _open(db)
    seqs: list[int] = []
    for i in range(10):
        handle = a if i % 2 else b
        seqs += handle.commit([append_list(value_list("l", "", SCOPE), i)]).seqs
    assert seqs == sorted(set(seqs))
    assert len(a.read_list(value_list("l", "", SCOPE))) == 10
    assert b.get_stats() == a.get_stats()


def test_threads_with_their_own_handles_on_one_session_never_share_a_sequence(db: Path) -> None:
    seqs: list[int] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        storage = _open(db)
        for i in range(30):
            result = storage.commit([set_value(value("t", f"{n}-{i}", SCOPE), i)])
            with lock:
                seqs.extend(result.seqs)
        storage.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(seqs) == list(range(1, 121))


def _process_writer(db: str, n: int, queue: multiprocessing.Queue[list[int]]) -> None:
    storage = open_storage(f"sqlite://{db}", "s1")
    seqs: list[int] = []
    for i in range(25):
        seqs += storage.commit([set_value(value("p", f"{n}-{i}", SCOPE), i)]).seqs
    storage.close()
    queue.put(seqs)


def test_processes_creating_and_writing_one_file_never_share_a_sequence(db: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[list[int]] = ctx.Queue()
    processes = [ctx.Process(target=_process_writer, args=(str(db), n, queue)) for n in range(3)]
    for process in processes:
        process.start()
    seqs = [seq for _ in processes for seq in queue.get(timeout=60)]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert sorted(seqs) == list(range(1, 76))


def test_writer_locked_out_past_the_busy_timeout_gets_a_conflict_error_and_applies_nothing(
    db: Path, raw: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("turnkeep.storage.sqlite_schema.BUSY_TIMEOUT_MS", 50)
    storage = _open(db)
    raw.isolation_level = None
    raw.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
    try:
        with pytest.raises(StorageConflictError, match="locked"):
            storage.commit([set_value(value("x"), 1)])
    finally:
        raw.execute("ROLLBACK")
    assert storage.get_value(value("x")) is None
    assert storage.commit([set_value(value("x"), 2)]).first_seq == 1


# -- repository ------------------------------------------------------------------------------


def test_delete_session_removes_every_row_of_that_session_scoped_ones_included(
    db: Path, raw: sqlite3.Connection
) -> None:
    for session_id in ("s1", "s2"):
        storage = _open(db, session_id)
        storage.commit([insert_entry("e", None, "message"), set_value(value("x"), 1)])
        _fill_scope(storage)
        storage.close()
    repository = open_repository(f"sqlite://{db}")
    repository.delete_session("s1")
    repository.close()
    for table in ("scalar_values", "list_values", "entries", "usage", "sessions"):
        assert _count(raw, table, "s1", None) == 0
    assert _count(raw, "scalar_values", "s2", "op-1") == 1
    assert _count(raw, "list_values", "s2", "op-1") == 2
    assert _count(raw, "entries", "s2", None) == 1


def test_repository_lists_only_sessions_that_committed(db: Path) -> None:
    _open(db, "read-only").get_stats()
    _open(db, "written").commit([set_value(value("x"), 1)])
    repository = open_repository(f"sqlite://{db}")
    try:
        assert repository.list_sessions() == ["written"]
    finally:
        repository.close()


def test_every_commit_takes_the_write_lock_up_front_with_begin_immediate(tmp_path: Path) -> None:
    # BEGIN IMMEDIATE makes sequence allocation wait for the file's write lock instead of
    # failing mid-transaction when another handle or process commits first.
    storage = open_storage(f"sqlite:///{tmp_path / 'lock.db'}", "s1")
    assert isinstance(storage, SqliteStorage)
    statements: list[str] = []
    storage._conn.set_trace_callback(statements.append)
    storage.commit([set_value(value("a"), 1)])
    storage.commit([set_value(value("a", "", ephemeral_scope("op")), 2)])
    storage.close()
    begins = [s for s in statements if s.upper().startswith("BEGIN")]
    assert begins == ["BEGIN IMMEDIATE", "BEGIN IMMEDIATE"]
