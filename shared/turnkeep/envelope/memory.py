"""In-process envelope store (`memory://[name]`): the reference backend.

Handles opened on the same name share one process-wide state, like `turnkeep.storage`'s
memory backend. One lock makes each call atomic, which is the guarantee the other backends
give with transactions and conditional writes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

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
)
from turnkeep.envelope.model import MetaScalar


@dataclass
class _Row:
    owner_id: object
    created_at: object
    updated_at: object
    meta: dict[str, object] = field(default_factory=dict)


@dataclass
class MemoryEnvelopeState:
    """The rows of one named in-process store."""

    rows: dict[str, _Row] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)


_REGISTRY: dict[str, MemoryEnvelopeState] = {}
_REGISTRY_LOCK = threading.Lock()


def memory_envelope_state(name: str = "") -> MemoryEnvelopeState:
    """The process-wide state called `name` (`memory://name`)."""
    with _REGISTRY_LOCK:
        return _REGISTRY.setdefault(name, MemoryEnvelopeState())


class MemoryEnvelopeStore(EnvelopeStore):
    """Envelopes in a dict; a fresh private state unless one is passed in."""

    def __init__(self, state: MemoryEnvelopeState | None = None, *, clock: Clock | None = None):
        super().__init__(clock=clock)
        self.state = state if state is not None else MemoryEnvelopeState()

    def _raw(self, session_id: str, row: _Row) -> RawEnvelope:
        return RawEnvelope(session_id, row.owner_id, row.created_at, row.updated_at, dict(row.meta))

    def _create(
        self, session_id: str, owner_id: str, meta: dict[str, MetaScalar], now: int
    ) -> RawEnvelope:
        with self.state.lock:
            if session_id in self.state.rows:
                raise EnvelopeExistsError(f"session {session_id!r} already has an envelope")
            row = _Row(owner_id, now, now, dict(meta))
            self.state.rows[session_id] = row
            return self._raw(session_id, row)

    def _load(self, session_id: str) -> RawEnvelope | None:
        with self.state.lock:
            row = self.state.rows.get(session_id)
            return None if row is None else self._raw(session_id, row)

    def _session_ids(self) -> list[str]:
        with self.state.lock:
            return sorted(self.state.rows)

    def _list_owner(self, owner_id: str) -> list[RawEnvelope]:
        with self.state.lock:
            return [self._raw(s, r) for s, r in self.state.rows.items() if r.owner_id == owner_id]

    def _owned_row(self, session_id: str, owner_id: str | None) -> _Row:
        row = self.state.rows.get(session_id)
        if row is None or (owner_id is not None and row.owner_id != owner_id):
            raise EnvelopeNotFoundError(f"no envelope for session {session_id!r}")
        return row

    def _put_host(self, session_id: str, owner_id: str, meta: dict[str, MetaScalar]) -> RawEnvelope:
        with self.state.lock:
            row = self._owned_row(session_id, owner_id)
            for key in cleared_host_keys(meta):
                row.meta.pop(key, None)
            row.meta.update(meta)
            row.updated_at = next_updated_at(row.updated_at, self._now())
            return self._raw(session_id, row)

    def _update_worker(
        self,
        session_id: str,
        patch: dict[str, MetaScalar | None],
        expect: dict[str, tuple[MetaScalar | None, ...]],
        owner_id: str | None,
    ) -> RawEnvelope:
        with self.state.lock:
            row = self._owned_row(session_id, owner_id)
            if not keys.expect_holds(row.meta, expect):
                raise EnvelopeConflictError(keys.describe_conflict(session_id, row.meta, expect))
            sets, removes = split_patch(patch)
            for key in removes:
                row.meta.pop(key, None)
            row.meta.update(sets)
            row.updated_at = next_updated_at(row.updated_at, self._now())
            return self._raw(session_id, row)

    def _delete(self, session_id: str) -> None:
        with self.state.lock:
            self.state.rows.pop(session_id, None)

    def _close(self) -> None:
        # The state is shared by name and outlives a handle, like memory:// storage.
        return None

    # -- test hook ------------------------------------------------------------------------------

    def poke_raw(self, session_id: str, key: str, value: object) -> None:
        """Store `value` under `key` bypassing validation (tests plant poison with it)."""
        with self.state.lock:
            self.state.rows[session_id].meta[key] = value
