"""The SQLite envelope store: handles share one database file under the test's tmp_path."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conformance.envelope_backends import EnvelopeBackend
from tests.support.envelope_stores import ManualClock
from turnkeep.envelope import EnvelopeStore
from turnkeep.envelope.sqlite import SqliteEnvelopeStore


def _write_updated_at(store: EnvelopeStore, session_id: str, value: str) -> None:
    assert isinstance(store, SqliteEnvelopeStore)
    with store._write() as conn:
        conn.execute(
            "UPDATE envelopes SET updated_at = ? WHERE session_id = ?", (value, session_id)
        )


@contextmanager
def make(tmp_path: Path, clock: ManualClock) -> Iterator[EnvelopeBackend]:
    """Stores over one fresh database file."""
    path = str(tmp_path / f"envelopes-{uuid.uuid4().hex[:8]}.db")
    yield EnvelopeBackend(
        "sqlite", lambda: SqliteEnvelopeStore(path, clock=clock), clock, _write_updated_at
    )
