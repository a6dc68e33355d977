"""Scoped (ephemeral) transactions: object bodies and the replayed view of one scope."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from turnkeep.storage.addresses import Value, ValueList
from turnkeep.storage.errors import StorageCorruptionError
from turnkeep.storage.memory_state import MemoryState
from turnkeep.storage.scopes import EphemeralScope
from turnkeep.storage.writes import AppendList, DeleteList, DeleteValue, SetValue, Write

ObjectWrites = list[dict[str, Any]]
"""The writes of one scoped-transaction object, each with its sequence."""


_OPS: dict[type, str] = {
    SetValue: "set",
    DeleteValue: "del",
    AppendList: "append",
    DeleteList: "del_list",
}


def object_writes(writes: tuple[Write, ...], seqs: tuple[int, ...]) -> ObjectWrites:
    """Serializable form of a validated ephemeral transaction (value/list writes only)."""
    out: ObjectWrites = []
    for write, seq in zip(writes, seqs, strict=True):
        if not isinstance(write, (SetValue, DeleteValue, AppendList, DeleteList)):
            raise TypeError(f"{write!r} cannot be part of an ephemeral transaction")
        item: dict[str, Any] = {
            "op": _OPS[type(write)],
            "ns": write.address.namespace,
            "key": write.address.key,
            "seq": seq,
        }
        if isinstance(write, SetValue):
            item["v"] = write.value_json
        elif isinstance(write, AppendList):
            item["v"] = write.element_json
            if write.tag is not None:
                item["tag"] = write.tag
        out.append(item)
    return out


def _to_write(raw: dict[str, Any], scope: EphemeralScope, key: str) -> tuple[Write, int]:
    try:
        op, ns, k, seq = raw["op"], raw["ns"], raw["key"], int(raw["seq"])
        if op == "set":
            return SetValue(Value(ns, k, scope), raw["v"]), seq
        if op == "del":
            return DeleteValue(Value(ns, k, scope)), seq
        if op == "append":
            return AppendList(ValueList(ns, k, scope), raw["v"], raw.get("tag")), seq
        if op == "del_list":
            return DeleteList(ValueList(ns, k, scope)), seq
    except (KeyError, TypeError, ValueError) as exc:
        raise StorageCorruptionError(f"scoped object {key!r} holds a malformed write") from exc
    raise StorageCorruptionError(f"scoped object {key!r} holds unknown write op {op!r}")


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
