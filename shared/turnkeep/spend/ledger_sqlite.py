"""SQLite spend ledger (`sqlite:///abs/file.db`, the envelope store's file): a charge is one
`BEGIN IMMEDIATE` transaction (its key row, then its usage line), so concurrent turns of many
processes never lose or double a charge (docs/usage.md, "The ledger")."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

from turnkeep.plumbing.sqlite_wal import use_wal
from turnkeep.providers.base import Usage
from turnkeep.spend.ledger import Charge, DayTotals, SpendLedger, UsageLine

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS spend_charges (key TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spend_lines (
    user_id TEXT NOT NULL,
    day TEXT NOT NULL,
    session_id TEXT NOT NULL,
    model TEXT NOT NULL,
    rounds INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    cost_micros INTEGER NOT NULL,
    estimated INTEGER NOT NULL,
    PRIMARY KEY (user_id, day, session_id, model)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS spend_lines_by_day ON spend_lines (day);
"""

_ADD_LINE: Final = """
INSERT INTO spend_lines VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)
ON CONFLICT (user_id, day, session_id, model) DO UPDATE SET
    rounds = rounds + 1,
    input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
    cost_micros = cost_micros + excluded.cost_micros,
    estimated = max(estimated, excluded.estimated)
"""


class SqliteLedger(SpendLedger):
    """The ledger's two tables in one SQLite file (WAL mode, busy timeout)."""

    def __init__(self, path: str, *, busy_timeout_s: float = 10.0) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        use_wal(self._conn, busy_timeout_s)
        with self._write() as conn:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def _read(self, sql: str, params: Sequence[object]) -> list[Any]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def charge(self, charge: Charge) -> bool:
        usage = charge.usage
        with self._write() as conn:
            done = conn.execute(
                "INSERT INTO spend_charges(key) VALUES (?) ON CONFLICT DO NOTHING", (charge.key,)
            )
            if done.rowcount == 0:
                return False
            conn.execute(
                _ADD_LINE,
                (
                    charge.user_id,
                    charge.day,
                    charge.session_id,
                    charge.model,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                    usage.cost_micros,
                    int(usage.estimated),
                ),
            )
            return True

    def day_totals(self, user_id: str, day: str) -> DayTotals:
        rows = self._read(
            "SELECT coalesce(sum(CASE WHEN user_id = ? THEN cost_micros END), 0), "
            "coalesce(sum(cost_micros), 0) FROM spend_lines WHERE day = ?",
            (user_id, day),
        )
        return DayTotals(int(rows[0][0]), int(rows[0][1]))

    def usage_lines(self, user_id: str, first_day: str, last_day: str) -> list[UsageLine]:
        rows = self._read(
            "SELECT day, session_id, model, rounds, input_tokens, output_tokens, "
            "cache_read_tokens, cache_write_tokens, estimated, cost_micros FROM spend_lines "
            "WHERE user_id = ? AND day BETWEEN ? AND ? ORDER BY day, session_id, model",
            (user_id, first_day, last_day),
        )
        return [
            UsageLine(day, session, model, rounds, Usage(inp, out, read, write, bool(est), cost))
            for day, session, model, rounds, inp, out, read, write, est, cost in rows
        ]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
