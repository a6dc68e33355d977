"""A storage file of schema version 1 (costs as REAL dollars) opens as version 2: its session
totals and usage rows carry the cost as integer micro-dollars, and new rows keep their turn."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from turnkeep.storage import UsageRow, insert_usage, open_storage

# The version-1 tables as turnkeep wrote them (never regenerate from the current schema).
V1_SCHEMA = """
CREATE TABLE turnkeep_schema(component TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO turnkeep_schema VALUES ('storage', 1);
CREATE TABLE sessions(session_id TEXT PRIMARY KEY, next_seq INTEGER NOT NULL,
  created_at INTEGER NOT NULL, entry_count INTEGER NOT NULL DEFAULT 0,
  message_count INTEGER NOT NULL DEFAULT 0, usage_rows INTEGER NOT NULL DEFAULT 0,
  input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
  cache_read_tokens INTEGER NOT NULL DEFAULT 0, cache_write_tokens INTEGER NOT NULL DEFAULT 0,
  cost_usd REAL NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE TABLE scalar_values(session_id TEXT NOT NULL, scope_id TEXT NOT NULL,
  namespace TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY(session_id, scope_id, namespace, key)) WITHOUT ROWID;
CREATE TABLE list_values(session_id TEXT NOT NULL, scope_id TEXT NOT NULL,
  namespace TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL, value TEXT NOT NULL,
  tag TEXT, PRIMARY KEY(session_id, scope_id, namespace, key, seq)) WITHOUT ROWID;
CREATE TABLE entries(session_id TEXT NOT NULL, id TEXT NOT NULL, parent_id TEXT,
  type TEXT NOT NULL, data TEXT NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY(session_id, id)) WITHOUT ROWID;
CREATE UNIQUE INDEX entries_by_seq ON entries(session_id, seq);
CREATE TABLE usage(session_id TEXT NOT NULL, seq INTEGER NOT NULL,
  input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
  cache_read_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL,
  cost_usd REAL NOT NULL, model TEXT, PRIMARY KEY(session_id, seq)) WITHOUT ROWID;
INSERT INTO sessions(session_id, next_seq, created_at, usage_rows, input_tokens, cost_usd)
  VALUES ('s1', 2, 1764520000000, 1, 10, 0.0125);
INSERT INTO usage VALUES ('s1', 1, 10, 0, 0, 0, 0.0125, 'm');
"""


def test_a_version_1_file_opens_with_its_costs_as_micro_dollars(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(V1_SCHEMA)
    conn.close()

    with open_storage(f"sqlite:///{path}", "s1") as storage:
        assert storage.snapshot().usage == (
            UsageRow(input_tokens=10, cost_micros=12_500, model="m"),
        )
        assert storage.get_stats().cost_micros == 12_500
        storage.commit([insert_usage(UsageRow(input_tokens=1, cost_micros=7, op_id="op-1"))])
        assert storage.get_stats().cost_micros == 12_507

    with sqlite3.connect(path) as check:
        version = check.execute(
            "SELECT version FROM turnkeep_schema WHERE component = 'storage'"
        ).fetchone()
    assert version == (2,)
    with open_storage(f"sqlite:///{path}", "s1") as storage:
        assert storage.snapshot().usage[-1].op_id == "op-1"
