"""Resident session state: the reference semantics, shared by the memory and JSONL backends."""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field, replace
from typing import assert_never

from turnkeep.storage.addresses import Value, ValueList
from turnkeep.storage.jsonvalue import load_json, load_json_many
from turnkeep.storage.records import (
    MESSAGE_ENTRY_TYPE,
    Entry,
    ListElement,
    Snapshot,
    StorageStats,
    StoredValue,
)
from turnkeep.storage.refusals import duplicate_entry, guard_failed, missing_parent
from turnkeep.storage.scopes import Scope, scope_from_key, scope_key
from turnkeep.storage.writes import (
    AppendList,
    DeleteList,
    DeleteValue,
    InsertEntry,
    InsertUsage,
    RetireScope,
    SetValue,
    Transaction,
    UsageRow,
    Write,
    missing_parents,
)

PhysKey = tuple[str, str, str]
"""(scope key, namespace, key): scope is part of physical identity."""


class EntryTable:
    """Transcript entries in insertion order (= sequence order), stored column by column.

    Columns instead of one object per entry: a JSONL snapshot restores a session's entries as
    five lists and an index, with no per-entry Python object to build on open."""

    __slots__ = ("data", "ids", "index", "parents", "seqs", "types")

    def __init__(
        self,
        ids: list[str] | None = None,
        parents: list[str | None] | None = None,
        types: list[str] | None = None,
        data: list[str] | None = None,
        seqs: list[int] | None = None,
    ) -> None:
        """Columns of equal length, `seqs` strictly increasing (the caller guarantees both)."""
        self.ids: list[str] = ids if ids is not None else []
        self.parents: list[str | None] = parents if parents is not None else []
        self.types: list[str] = types if types is not None else []
        self.data: list[str] = data if data is not None else []
        """Canonical JSON text of each entry's payload."""
        self.seqs: list[int] = seqs if seqs is not None else []
        self.index: dict[str, int] = dict(zip(self.ids, range(len(self.ids)), strict=True))
        """Entry id -> position in the columns."""

    def __len__(self) -> int:
        return len(self.ids)

    def add(
        self, entry_id: str, parent_id: str | None, type: str, data_json: str, seq: int
    ) -> None:
        """Append one entry (its id is new and its seq above every earlier one)."""
        self.index[entry_id] = len(self.ids)
        self.ids.append(entry_id)
        self.parents.append(parent_id)
        self.types.append(type)
        self.data.append(data_json)
        self.seqs.append(seq)

    def rows(self, start: int = 0, stop: int | None = None) -> list[Entry]:
        """Entries at positions [start, stop), payloads decoded fresh."""
        window = slice(start, stop)
        payloads = load_json_many(self.data[window])
        return [
            Entry(entry_id, parent, type, payload, seq)
            for entry_id, parent, type, payload, seq in zip(
                self.ids[window],
                self.parents[window],
                self.types[window],
                payloads,
                self.seqs[window],
                strict=True,
            )
        ]

    def get(self, ids: list[str]) -> list[Entry]:
        """Entries with the given ids, in that order; unknown ids are skipped."""
        index = self.index
        found = [index[i] for i in ids if i in index]
        payloads = load_json_many([self.data[p] for p in found])
        return [
            Entry(self.ids[p], self.parents[p], self.types[p], payload, self.seqs[p])
            for p, payload in zip(found, payloads, strict=True)
        ]


@dataclass
class MemoryState:
    """Values, lists, entries, usage and the next sequence of one session."""

    next_seq: int = 1
    values: dict[PhysKey, tuple[str, int]] = field(default_factory=dict)
    lists: dict[PhysKey, list[tuple[int, str, str | None]]] = field(default_factory=dict)
    entries: EntryTable = field(default_factory=EntryTable)
    usage: list[UsageRow] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)
    """Attachments' bytes by name (docs/storage.md "Blobs"); not in snapshots (forks copy them)."""
    _stats: StorageStats = field(default_factory=StorageStats)
    _new_entries: int = 0
    _new_messages: int = 0
    """Entries applied since `_stats` was last brought up to date (see `stats`)."""
    lock: threading.RLock = field(default_factory=threading.RLock)

    @classmethod
    def restored(
        cls,
        values: dict[PhysKey, tuple[str, int]],
        lists: dict[PhysKey, list[tuple[int, str, str | None]]],
        entries: EntryTable,
        usage: list[UsageRow],
        stats: StorageStats,
    ) -> MemoryState:
        """State rebuilt from a saved copy (a JSONL snapshot); `stats` must match the rest."""
        return cls(values=values, lists=lists, entries=entries, usage=usage, _stats=stats)

    @property
    def stats(self) -> StorageStats:
        """The session's stats. Entry counts are folded in here, once per read, rather than as
        a new frozen StorageStats per applied entry (replay applies one per transcript line)."""
        if self._new_entries:
            self._stats = replace(
                self._stats,
                entry_count=self._stats.entry_count + self._new_entries,
                message_count=self._stats.message_count + self._new_messages,
            )
            self._new_entries = self._new_messages = 0
        return self._stats

    # -- writes -------------------------------------------------------------------------------

    def check(self, txn: Transaction) -> None:
        """Raise GuardFailedError or EntryConflictError if `txn` cannot apply; changes nothing."""
        if txn.guard is not None:
            stored = self.values.get(_phys(txn.guard))
            if stored is None or (txn.guard_seq is not None and stored[1] != txn.guard_seq):
                raise guard_failed(txn.guard, txn.guard_seq)
        index = self.entries.index
        duplicates = [i for i in txn.entry_ids if i in index]
        if duplicates:
            raise duplicate_entry(duplicates[0])
        missing = missing_parents(txn, index)
        if missing:
            raise missing_parent(*missing[0])

    def apply(self, txn: Transaction, first_seq: int) -> tuple[int, ...]:
        """Apply a checked transaction with sequences from `first_seq`; returns them."""
        seqs = tuple(range(first_seq, first_seq + len(txn.writes)))
        for write, seq in zip(txn.writes, seqs, strict=True):
            self.apply_write(write, seq)
        self.next_seq = max(self.next_seq, first_seq + len(txn.writes))
        return seqs

    def apply_write(self, write: Write, seq: int) -> None:
        """Apply one committed write (used by replay too)."""
        match write:
            case SetValue():
                self.values[_phys(write.address)] = (write.value_json, seq)
            case DeleteValue():
                self.values.pop(_phys(write.address), None)
            case AppendList():
                self.lists.setdefault(_phys(write.address), []).append(
                    (seq, write.element_json, write.tag)
                )
            case DeleteList():
                self.lists.pop(_phys(write.address), None)
            case RetireScope():
                self.retire(write.scope.id)
            case InsertEntry():
                self.entries.add(write.id, write.parent_id, write.type, write.data_json, seq)
                self._new_entries += 1
                if write.type == MESSAGE_ENTRY_TYPE:
                    self._new_messages += 1
            case InsertUsage():
                self.usage.append(write.row)
                self._stats = self.stats.with_usage(write.row)
            case _:
                assert_never(write)

    def retire(self, scope_id: str) -> None:
        """Delete every value and list of ephemeral scope `scope_id`."""
        for key in [k for k in self.values if k[0] == scope_id]:
            del self.values[key]
        for key in [k for k in self.lists if k[0] == scope_id]:
            del self.lists[key]

    # -- reads --------------------------------------------------------------------------------

    def get_value(self, address: Value) -> StoredValue | None:
        found = self.values.get(_phys(address))
        if found is None:
            return None
        return StoredValue(address, load_json(found[0]), found[1])

    def scan_values(self, namespace: str, key_prefix: str, scope: Scope) -> list[StoredValue]:
        sk = scope_key(scope)
        rows = sorted(
            (k[2], text, seq)
            for k, (text, seq) in self.values.items()
            if k[0] == sk and k[1] == namespace and k[2].startswith(key_prefix)
        )
        return [
            StoredValue(Value(namespace, key, scope), load_json(text), seq)
            for key, text, seq in rows
        ]

    def read_list(
        self, address: ValueList, cursor: int | None, order: str, limit: int
    ) -> list[ListElement]:
        rows = self.lists.get(_phys(address), [])
        if order == "asc":
            start = 0 if cursor is None else bisect.bisect_right(rows, cursor, key=lambda r: r[0])
            picked = rows[start : start + limit]
        else:
            end = (
                len(rows)
                if cursor is None
                else bisect.bisect_left(rows, cursor, key=lambda r: r[0])
            )
            picked = rows[max(0, end - limit) : end][::-1]
        return [ListElement(seq, load_json(text), tag) for seq, text, tag in picked]

    def get_entries(self, ids: list[str]) -> list[Entry]:
        return self.entries.get(ids)

    def scan_entries(self, after_seq: int | None, limit: int | None) -> list[Entry]:
        start = 0 if after_seq is None else bisect.bisect_right(self.entries.seqs, after_seq)
        return self.entries.rows(start, None if limit is None else start + limit)

    def snapshot(self) -> Snapshot:
        values = tuple(
            StoredValue(Value(k[1], k[2], scope_from_key(k[0])), load_json(text), seq)
            for k, (text, seq) in sorted(self.values.items())
            if k[0] == ""
        )
        lists = tuple(
            (
                ValueList(k[1], k[2], scope_from_key(k[0])),
                tuple(ListElement(seq, load_json(text), tag) for seq, text, tag in rows),
            )
            for k, rows in sorted(self.lists.items())
            if k[0] == ""
        )
        entries = tuple(self.entries.rows())
        return Snapshot(values, lists, entries, tuple(self.usage))


def _phys(address: Value | ValueList) -> PhysKey:
    return (scope_key(address.scope), address.namespace, address.key)
