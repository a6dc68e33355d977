"""Scoped (ephemeral) transactions: object bodies and the replayed view of one scope."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from turnkeep.storage.errors import StorageCorruptionError
from turnkeep.storage.memory_state import MemoryState
from turnkeep.storage.scopes import EphemeralScope
from turnkeep.storage.write_codec import (
    UnknownWriteError,
    decode_object_write,
    encode_object_write,
)
from turnkeep.storage.writes import SCOPED_WRITE_TYPES, Write

ObjectWrites = list[dict[str, Any]]
"""The writes of one scoped-transaction object, each with its sequence."""


def object_writes(writes: tuple[Write, ...], seqs: tuple[int, ...]) -> ObjectWrites:
    """Serializable form of a validated ephemeral transaction (value/list writes only)."""
    out: ObjectWrites = []
    for write, seq in zip(writes, seqs, strict=True):
        if not isinstance(write, SCOPED_WRITE_TYPES):
            raise TypeError(f"{write!r} cannot be part of an ephemeral transaction")
        out.append(encode_object_write(write, seq))
    return out


def _to_write(raw: dict[str, Any], scope: EphemeralScope, key: str) -> tuple[Write, int]:
    try:
        return decode_object_write(raw, scope)
    except UnknownWriteError as exc:
        raise StorageCorruptionError(f"scoped object {key!r} holds {exc}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise StorageCorruptionError(f"scoped object {key!r} holds a malformed write") from exc


@dataclass
class ScopeView:
    """The live state of one scope: objects after `boundary`, replayed in sequence order."""

    scope: EphemeralScope
    boundary: int
    state: MemoryState = field(default_factory=MemoryState)
    applied: set[str] = field(default_factory=set)
    high_seq: int = 0

    def apply(self, key: str, writes: ObjectWrites) -> bool:
        """Replay one object (idempotent per key); False if it would apply out of order."""
        if key in self.applied:
            return True
        parsed = [_to_write(raw, self.scope, key) for raw in writes]
        if parsed and parsed[0][1] <= self.boundary:
            self.applied.add(key)  # retired: never visible
            return True
        if parsed and parsed[0][1] <= self.high_seq:
            return False
        for write, seq in parsed:
            self.state.apply_write(write, seq)
            self.high_seq = max(self.high_seq, seq)
        self.applied.add(key)
        return True
