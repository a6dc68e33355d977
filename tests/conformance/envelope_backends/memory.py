"""The in-memory envelope store: handles share one `MemoryEnvelopeState`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conformance.envelope_backends import EnvelopeBackend
from tests.support.envelope_stores import ManualClock
from turnkeep.envelope import EnvelopeStore
from turnkeep.envelope.memory import MemoryEnvelopeState, MemoryEnvelopeStore


def _write_updated_at(store: EnvelopeStore, session_id: str, value: str) -> None:
    assert isinstance(store, MemoryEnvelopeStore)
    with store.state.lock:
        store.state.rows[session_id].updated_at = value


@contextmanager
def make(tmp_path: Path, clock: ManualClock) -> Iterator[EnvelopeBackend]:
    """Stores over one fresh in-memory state."""
    state = MemoryEnvelopeState()
    yield EnvelopeBackend(
        "memory", lambda: MemoryEnvelopeStore(state, clock=clock), clock, _write_updated_at
    )
