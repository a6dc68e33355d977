"""The sequence head item: last allocated sequence, session stats, pending cleanups and the
scopes written since their last retirement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from turnkeep.storage.aws.codec import Item, get_n, get_opt_s, stats_from_text
from turnkeep.storage.errors import StorageCorruptionError
from turnkeep.storage.records import StorageStats

LAST_SEQ: Final = "last_seq"
STATS: Final = "stats"
PENDING: Final = "pending"
"""String set of retirements whose S3 cleanup may be unfinished: `{boundary:020d}:{scope id}`."""
SCOPES: Final = "scopes"
"""String set of the scopes with a scoped write since their last retirement (ADDed with the
write's sequence allocation, DELETEd by the retirement)."""
SCOPES_SEQ: Final = "scopes_seq"
"""Sequences allocated by writers that keep `scopes`: equal to `last_seq` only while every
allocation on the head kept it (a head from before `scopes`, or a writer of an older release,
leaves it behind for good, and then `scopes` proves nothing: docs/aws-storage.md)."""


@dataclass(frozen=True, slots=True)
class Head:
    """What the head item held when last read or written by this process."""

    last_seq: int = 0
    stats: StorageStats = field(default_factory=StorageStats)
    pending: frozenset[str] = frozenset()
    exists: bool = False
    scopes: frozenset[str] = frozenset()
    scopes_seq: int = 0

    def proves_unwritten(self, scope_id: str) -> bool:
        """True when no scoped write went to `scope_id` since its last retirement (or ever)."""
        return self.scopes_seq == self.last_seq and scope_id not in self.scopes


def pending_marker(boundary: int, scope_id: str) -> str:
    """Marker of one retirement whose objects up to `boundary` must be deleted."""
    return f"{boundary:020d}:{scope_id}"


def parse_marker(marker: str) -> tuple[int, str]:
    """(boundary, scope id) of a pending-cleanup marker."""
    seq_text, sep, scope_id = marker.partition(":")
    if not sep or not seq_text.isdigit() or not scope_id:
        raise StorageCorruptionError(f"sequence head holds a malformed cleanup marker {marker!r}")
    return int(seq_text), scope_id


def head_from_item(item: Item | None) -> Head:
    """Parse a head item (None: the session has never committed)."""
    if not item:
        return Head()
    return Head(
        last_seq=get_n(item, LAST_SEQ, 0),
        stats=stats_from_text(get_opt_s(item, STATS)),
        pending=frozenset(item.get(PENDING, {}).get("SS", [])),
        exists=True,
        scopes=frozenset(item.get(SCOPES, {}).get("SS", [])),
        scopes_seq=get_n(item, SCOPES_SEQ, 0),
    )
