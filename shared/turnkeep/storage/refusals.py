"""The errors a backend raises when a commit is refused, one wording for every backend (the
conformance suite matches them)."""

from __future__ import annotations

from turnkeep.storage.addresses import Value
from turnkeep.storage.errors import EntryConflictError, GuardFailedError


def guard_failed(guard: Value, guard_seq: int | None = None) -> GuardFailedError:
    """The guard value is absent (or, with `guard_seq`, no longer that version)."""
    if guard_seq is None:
        return GuardFailedError(f"commit refused: guard {guard} does not exist")
    return GuardFailedError(
        f"commit refused: guard {guard} does not exist or changed since sequence {guard_seq}"
    )


def duplicate_entry(entry_id: str) -> EntryConflictError:
    """An entry with this id is stored already."""
    return EntryConflictError(f"entry id {entry_id!r} already exists")


def missing_parent(entry_id: str, parent_id: str) -> EntryConflictError:
    """The entry's parent is neither stored nor inserted earlier in the same transaction."""
    return EntryConflictError(
        f"entry {entry_id!r} names parent {parent_id!r}, which does not exist"
    )
