"""What the storage returns: stored values, list elements, entries, stats, commit results."""

from __future__ import annotations

from dataclasses import dataclass, field

from turnkeep.storage.addresses import Value, ValueList
from turnkeep.storage.jsonvalue import JsonValue
from turnkeep.storage.writes import UsageRow


@dataclass(frozen=True, slots=True)
class StoredValue:
    """A value as stored, with the sequence of the write that set it."""

    address: Value
    value: JsonValue
    seq: int


@dataclass(frozen=True, slots=True)
class ListElement:
    """One list element with its sequence and optional tag."""

    seq: int
    value: JsonValue
    tag: str | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """One transcript entry; entries form a tree through parent ids."""

    id: str
    parent_id: str | None
    type: str
    data: JsonValue
    seq: int


MESSAGE_ENTRY_TYPE = "message"


@dataclass(frozen=True, slots=True)
class StorageStats:
    """Session totals over entries and usage; scoped state never counts."""

    entry_count: int = 0
    message_count: int = 0
    usage_rows: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_micros: int = 0
    """Integer micro-dollars (docs/usage.md)."""

    def with_entry(self, entry_type: str) -> StorageStats:
        """Stats after one more entry of `entry_type`."""
        return _replace(
            self,
            entry_count=self.entry_count + 1,
            message_count=self.message_count + (1 if entry_type == MESSAGE_ENTRY_TYPE else 0),
        )

    def with_usage(self, row: UsageRow) -> StorageStats:
        """Stats after one more usage row."""
        return _replace(
            self,
            usage_rows=self.usage_rows + 1,
            input_tokens=self.input_tokens + row.input_tokens,
            output_tokens=self.output_tokens + row.output_tokens,
            cache_read_tokens=self.cache_read_tokens + row.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + row.cache_write_tokens,
            cost_micros=self.cost_micros + row.cost_micros,
        )


def _replace(stats: StorageStats, **changes: int) -> StorageStats:
    fields = {name: getattr(stats, name) for name in StorageStats.__dataclass_fields__}
    fields.update(changes)
    return StorageStats(**fields)


@dataclass(frozen=True, slots=True)
class CommitResult:
    """Outcome of one commit: one sequence per write; an empty commit has none."""

    first_seq: int | None
    seqs: tuple[int, ...]
    timestamp: int
    """Commit time in milliseconds since the epoch."""
    stats: StorageStats


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Session-scoped state for forks: never holds ephemeral values or lists."""

    values: tuple[StoredValue, ...] = ()
    lists: tuple[tuple[ValueList, tuple[ListElement, ...]], ...] = ()
    entries: tuple[Entry, ...] = ()
    usage: tuple[UsageRow, ...] = field(default=())
