"""Forks: copy a session's durable state into a new, empty session (never ephemeral state)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from turnkeep.storage.addresses import value
from turnkeep.storage.base import Storage
from turnkeep.storage.errors import StorageValidationError
from turnkeep.storage.records import CommitResult, Snapshot
from turnkeep.storage.writes import (
    Write,
    append_list,
    insert_entry,
    insert_usage,
    set_value,
)

FORK_MARKER: Final = value("turnkeep.fork", "source")
"""Written by the fork's last transaction: the fork is complete once it exists."""

DEFAULT_FORK_CHUNK: Final = 24
"""Writes per transaction: fits the AWS backend's 100-action limit (an entry is 2 items plus
its parent check)."""


def snapshot_writes(snapshot: Snapshot) -> Iterator[Write]:
    """The writes that recreate `snapshot` in an empty session, in dependency order."""
    for stored in snapshot.values:
        yield set_value(stored.address, stored.value)
    for address, elements in snapshot.lists:
        for element in elements:
            yield append_list(address, element.value, element.tag)
    for entry in sorted(snapshot.entries, key=lambda e: e.seq):
        yield insert_entry(entry.id, entry.parent_id, entry.type, entry.data)
    for row in snapshot.usage:
        yield insert_usage(row)


def fork_session(
    source: Storage, target: Storage, *, chunk: int = DEFAULT_FORK_CHUNK
) -> list[CommitResult]:
    """Copy `source`'s session-scoped values, lists, entries, usage and blobs (attachments'
    bytes) into the empty `target`.

    Ephemeral scopes are never copied (a fork starts with no operation in flight). The copy is
    committed in transactions of at most `chunk` writes, the last of which sets FORK_MARKER to
    the source session id: a target without the marker holds an interrupted fork.
    """
    if chunk < 1:
        raise StorageValidationError(f"fork chunk must be >= 1, got {chunk}")
    if source.session_id == target.session_id:
        raise StorageValidationError(f"cannot fork session {source.session_id!r} into itself")
    existing = target.snapshot()
    if existing.values or existing.lists or existing.entries or existing.usage:
        raise StorageValidationError(
            f"fork target session {target.session_id!r} is not empty; fork into a new session"
        )
    # The blobs first: the marker, committed last, then also proves every blob was copied.
    source_blobs, target_blobs = source.blobs(), target.blobs()
    for name in source_blobs.names():
        data = source_blobs.get(name)
        if data is not None:
            target_blobs.put(name, data)
    writes = [*snapshot_writes(source.snapshot()), set_value(FORK_MARKER, source.session_id)]
    return [target.commit(writes[i : i + chunk]) for i in range(0, len(writes), chunk)]
