"""The `EnvelopeStore` interface: validation and read-back live here, persistence in backends.

Public methods validate their arguments (typed `MetaValidationError`, nothing written), call
one backend primitive, and decode what was stored leniently (poison values read as unset).
Backends implement the `_`-prefixed primitives with these guarantees:

- every write sets `updated_at = max(stored.updated_at + 1, now_ms)` atomically with its change;
- a host PUT replaces exactly the host keys; a worker write touches exactly the named keys;
- `expect` is checked atomically with the write, against stored values as a read sees them
  (absent or poison = None, `keys.read_back`).
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from turnkeep.envelope import keys
from turnkeep.envelope.errors import EnvelopeClosedError, EnvelopeError
from turnkeep.envelope.model import Envelope, MetaScalar
from turnkeep.storage.attached import AttachedKey, AttachedUpdate

logger = logging.getLogger(__name__)

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def stored_stamp(value: object) -> int:
    """A stored epoch-ms timestamp as read back: anything but a non-negative int reads as 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


def next_updated_at(stored: object, now: int) -> int:
    """The strictly-newer `updatedAt` of a write over the raw `stored` one (clock skew never
    goes back; a poison stored value counts as 0)."""
    return max(stored_stamp(stored) + 1, now)


def split_patch(
    patch: Mapping[str, MetaScalar | None],
) -> tuple[dict[str, MetaScalar], list[str]]:
    """A validated worker patch as (keys to set with their values, sorted keys to remove)."""
    sets = {k: v for k, v in patch.items() if v is not None}
    return sets, sorted(k for k, v in patch.items() if v is None)


def cleared_host_keys(meta: Mapping[str, MetaScalar]) -> list[str]:
    """The host keys a full-set host PUT of `meta` removes (absent = clear), sorted."""
    return sorted(keys.HOST_META_KEYS - meta.keys())


@dataclass(frozen=True, slots=True)
class RawEnvelope:
    """An envelope as a backend read it, before poison is dropped."""

    session_id: str
    owner_id: object
    created_at: object
    updated_at: object
    meta: Mapping[str, object] = field(default_factory=dict)


class EnvelopeStore(ABC):
    """Session envelopes: one small record per session, owned by one user."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or wall_clock_ms
        self._closed = False
        self._state_lock = threading.Lock()

    # -- public API -----------------------------------------------------------------------------

    def create(
        self,
        session_id: str,
        owner_id: str,
        host_meta: Mapping[str, MetaScalar] | None = None,
        *,
        parent_session_id: str | None = None,
    ) -> Envelope:
        """Store a new envelope with `host_meta`; `EnvelopeExistsError` when one exists.

        `parent_session_id` marks a child session (a sub-agent call's) in the same write, so
        `list_for_owner` callers can filter children out and find a parent's children."""
        sid = keys.validate_session_id(session_id)
        oid = keys.validate_owner_id(owner_id)
        meta = keys.validate_host_meta({} if host_meta is None else host_meta)
        if parent_session_id is not None:
            meta["parentSessionId"] = keys.validate_parent_session_id(parent_session_id)
        self._check_open()
        return self._decode_written(self._create(sid, oid, meta, self._clock()))

    def get(self, session_id: str) -> Envelope | None:
        """The envelope, or None; bad stored data drops to unset and never raises."""
        sid = keys.validate_session_id(session_id)
        self._check_open()
        raw = self._load(sid)
        return None if raw is None else decode(raw)

    def get_for_owner(self, owner_id: str, session_id: str) -> Envelope | None:
        """The envelope when `owner_id` owns it; None when absent or another owner's."""
        oid = keys.validate_owner_id(owner_id)
        envelope = self.get(session_id)
        return envelope if envelope is not None and envelope.owner_id == oid else None

    def list_for_owner(self, owner_id: str) -> list[Envelope]:
        """Every envelope `owner_id` owns, oldest first (created_at, then session id)."""
        oid = keys.validate_owner_id(owner_id)
        self._check_open()
        found = [decode(raw) for raw in self._list_owner(oid)]
        mine = [e for e in found if e is not None and e.owner_id == oid]
        return sorted(mine, key=lambda e: (e.created_at, e.session_id))

    def local_session_ids(self) -> list[str] | None:
        """Every session id with an envelope, sorted, for local start-up scans; None when the
        backend cannot list them cheaply (DynamoDB would need a table Scan)."""
        self._check_open()
        return self._session_ids()

    def _session_ids(self) -> list[str] | None:
        return None

    def put_host_meta(
        self, session_id: str, owner_id: str, meta: Mapping[str, MetaScalar | None]
    ) -> Envelope:
        """Replace the full host key set (absent or None = clear); worker keys are never touched.

        `EnvelopeNotFoundError` when the session is absent or owned by someone else.
        """
        sid = keys.validate_session_id(session_id)
        oid = keys.validate_owner_id(owner_id)
        host = keys.validate_host_meta(meta)
        self._check_open()
        return self._decode_written(self._put_host(sid, oid, host))

    def update_worker_meta(
        self,
        session_id: str,
        patch: Mapping[str, MetaScalar | None],
        *,
        expect: Mapping[str, Collection[MetaScalar | None]] | None = None,
        owner_id: str | None = None,
    ) -> Envelope:
        """Set (value) or unset (None) exactly the named worker keys, field-level.

        `expect`: apply only if each named key's stored value as a read sees it (None when
        unset or poison) is among the allowed values, else `EnvelopeConflictError`.
        `owner_id`, when given, must own the session (else `EnvelopeNotFoundError`, as for a
        missing session).
        """
        sid = keys.validate_session_id(session_id)
        oid = None if owner_id is None else keys.validate_owner_id(owner_id)
        checked = keys.validate_worker_patch(patch)
        conditions = keys.validate_expect(expect)
        self._check_open()
        return self._decode_written(self._update_worker(sid, checked, conditions, oid))

    # -- riding on session storage's requests (docs/aws-storage.md) ---------------------------

    def attached_key(self, session_id: str) -> AttachedKey | None:
        """The envelope's item for a storage that shares its table (`Storage.prefetch`,
        `Storage.commit(attach=...)`); None when this store keeps envelopes elsewhere."""
        return None

    def decode_attached(self, item: Mapping[str, Any] | None) -> Envelope | None:
        """The envelope read as an attached item (None: absent or unreadable)."""
        raise EnvelopeError(f"{type(self).__name__} has no attached items")

    def attached_update(
        self,
        session_id: str,
        patch_for: Callable[[tuple[int, ...]], Mapping[str, MetaScalar | None]],
        *,
        expect: Mapping[str, Collection[MetaScalar | None]] | None = None,
        owner_id: str | None = None,
        stamp: int | None = None,
    ) -> AttachedUpdate | None:
        """`update_worker_meta` as an update applied inside a storage commit, its patch built
        from the commit's sequences; None when this store cannot (write it separately)."""
        return None

    def attached_failure(
        self,
        session_id: str,
        item: Mapping[str, Any] | None,
        *,
        expect: Mapping[str, Collection[MetaScalar | None]] | None = None,
        owner_id: str | None = None,
    ) -> int:
        """Why an attached update's condition failed: `EnvelopeNotFoundError` or
        `EnvelopeConflictError` as `update_worker_meta` would raise, else (a lost `updatedAt`
        race) the stamp to retry with once."""
        raise EnvelopeError(f"{type(self).__name__} has no attached updates")

    def delete(self, session_id: str) -> None:
        """Remove the envelope (and nothing else of the session); absent is fine."""
        sid = keys.validate_session_id(session_id)
        self._check_open()
        self._delete(sid)

    def close(self) -> None:
        """Release the handle; idempotent. Later calls raise `EnvelopeClosedError`."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        self._close()

    # -- backend primitives ---------------------------------------------------------------------

    @abstractmethod
    def _create(
        self, session_id: str, owner_id: str, meta: dict[str, MetaScalar], now: int
    ) -> RawEnvelope:
        """Insert unless present (`EnvelopeExistsError`); created_at = updated_at = now."""

    @abstractmethod
    def _load(self, session_id: str) -> RawEnvelope | None:
        """The stored envelope (strongly consistent), or None."""

    @abstractmethod
    def _list_owner(self, owner_id: str) -> list[RawEnvelope]:
        """Every stored envelope indexed under `owner_id`."""

    @abstractmethod
    def _put_host(self, session_id: str, owner_id: str, meta: dict[str, MetaScalar]) -> RawEnvelope:
        """Set the given host keys, remove the other host keys; owner must match."""

    @abstractmethod
    def _update_worker(
        self,
        session_id: str,
        patch: dict[str, MetaScalar | None],
        expect: dict[str, tuple[MetaScalar | None, ...]],
        owner_id: str | None,
    ) -> RawEnvelope:
        """Set/remove exactly the patch keys if `expect` holds; owner must match when given."""

    @abstractmethod
    def _delete(self, session_id: str) -> None:
        """Delete the envelope record only."""

    @abstractmethod
    def _close(self) -> None:
        """Release backend resources (called once)."""

    # -- helpers ---------------------------------------------------------------------------------

    def _now(self) -> int:
        return self._clock()

    def _check_open(self) -> None:
        if self._closed:
            raise EnvelopeClosedError(f"{type(self).__name__} is closed")

    def _decode_written(self, raw: RawEnvelope) -> Envelope:
        envelope = decode(raw)
        if envelope is None:  # only if the backend stored something unreadable itself
            raise AssertionError(f"envelope {raw.session_id} unreadable right after a write")
        return envelope


def decode(raw: RawEnvelope) -> Envelope | None:
    """The envelope with poison dropped; None when even the owner is unreadable."""
    if not isinstance(raw.owner_id, str) or not raw.owner_id:
        logger.warning("envelope %s: unreadable owner id; treating as absent", raw.session_id)
        return None
    meta = raw.meta if isinstance(raw.meta, Mapping) else {}
    return Envelope(
        session_id=raw.session_id,
        owner_id=raw.owner_id,
        meta=keys.sanitize_meta(meta, session_id=raw.session_id),
        created_at=stored_stamp(raw.created_at),
        updated_at=stored_stamp(raw.updated_at),
    )
