"""Snapshot of a JSONL main log (docs/jsonl-format.md, Snapshot): a cache that lets open skip
replaying the prefix of the main log it covers.

`{main}.snapshot` holds two lines. The header names the session and the covered prefix of the
main log — its length in bytes and lines and its SHA-256 — and the SHA-256 of the body. The body
holds what replaying that prefix builds: the session-scoped values and lists, the entries, the
usage rows and stats, plus what replay learns on the way (`MainLog`). Scoped state is never in
it: sidecars are always replayed from their files.

A snapshot is only ever used when its header and body check out against the main log as it is
on disk; anything else (torn, stale, of another session or format) is rejected and the whole log
replayed, so losing or corrupting the file costs time, never data.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Final

from turnkeep.storage.jsonvalue import dump_compact
from turnkeep.storage.memory_state import EntryTable, MemoryState, PhysKey
from turnkeep.storage.records import StorageStats
from turnkeep.storage.scopes import SESSION_SCOPE, scope_key
from turnkeep.storage.writes import UsageRow

SNAPSHOT_VERSION: Final = 2
"""2: stats hold integer micro-dollars; a v1 snapshot is rejected and the log replayed."""
_KIND: Final = "jsonl_snapshot"
_SESSION_KEY: Final = scope_key(SESSION_SCOPE)
_STATS_FIELDS: Final = tuple(StorageStats.__dataclass_fields__)


class SnapshotRejected(ValueError):
    """The snapshot does not describe the main log as it is; the log is replayed instead."""


@dataclass(slots=True)
class MainLog:
    """What replaying the main log's records yields besides state; commits keep it current."""

    lines: int = 1
    """Complete lines, the header included."""
    last_seq: int = 0
    """Last sequence of the last record (0: no record yet)."""
    run_firsts: list[int] = field(default_factory=list)
    run_lasts: list[int] = field(default_factory=list)
    """Sequence spans [first, last] the records hold, in order, touching spans merged: open
    checks that no sidecar record holds a sequence inside them without reading those records."""
    boundaries: dict[str, int] = field(default_factory=dict)
    """Latest retirement sequence per scope id."""

    def add(self, first: int, last: int) -> None:
        """Count one more record holding sequences `first`..`last` (above every earlier one)."""
        self.lines += 1
        self.last_seq = last
        if self.run_lasts and self.run_lasts[-1] + 1 == first:
            self.run_lasts[-1] = last
        else:
            self.run_firsts.append(first)
            self.run_lasts.append(last)

    def holds_any(self, first: int, last: int) -> bool:
        """True if a record holds a sequence span that meets [first, last]."""
        # Spans are disjoint and ordered: only the last one starting at or before `last` can
        # reach back to `first`.
        index = bisect.bisect_right(self.run_firsts, last) - 1
        return index >= 0 and self.run_lasts[index] >= first

    def copy(self) -> MainLog:
        """An independent copy."""
        return MainLog(
            self.lines,
            self.last_seq,
            list(self.run_firsts),
            list(self.run_lasts),
            dict(self.boundaries),
        )


@dataclass(slots=True)
class Restored:
    """A snapshot that checked out: the prefix it covers and what replaying it built."""

    log_bytes: int
    main: MainLog
    state: MemoryState


def _digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def encode(session_id: str, log_prefix: bytes, main: MainLog, state: MemoryState) -> bytes:
    """The snapshot of a main log whose complete lines are `log_prefix`, replayed into `state`
    (its session-scoped part) and `main`."""
    values = [
        [key[1], key[2], text, seq]
        for key, (text, seq) in state.values.items()
        if key[0] == _SESSION_KEY
    ]
    lists = [
        [key[1], key[2], [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]]
        for key, rows in state.lists.items()
        if key[0] == _SESSION_KEY
    ]
    entries = state.entries
    stats = state.stats
    body_obj = {
        "lastSeq": main.last_seq,
        "runFirsts": main.run_firsts,
        "runLasts": main.run_lasts,
        "boundaries": main.boundaries,
        "values": values,
        "lists": lists,
        "entries": [entries.ids, entries.parents, entries.types, entries.data, entries.seqs],
        "usage": [row.to_json() for row in state.usage],
        "stats": [getattr(stats, name) for name in _STATS_FIELDS],
    }
    body = (dump_compact(body_obj) + "\n").encode("utf-8")
    header = {
        "v": SNAPSHOT_VERSION,
        "kind": _KIND,
        "sessionId": session_id,
        "logBytes": len(log_prefix),
        "logLines": main.lines,
        "logSha256": _digest(log_prefix),
        "bodySha256": _digest(body),
    }
    return (dump_compact(header) + "\n").encode("utf-8") + body


def load(content: bytes, session_id: str, log: bytes) -> Restored:
    """Check snapshot `content` against `log` (the main log's complete lines) and restore it.

    Raises SnapshotRejected naming the first check that failed."""
    split = content.find(b"\n") + 1
    if split == 0 or not content.endswith(b"\n"):
        raise SnapshotRejected("torn (no complete header and body)")
    header = _object(content[:split], "header")
    if header.get("kind") != _KIND or header.get("v") != SNAPSHOT_VERSION:
        raise SnapshotRejected(
            f"kind {header.get('kind')!r} v={header.get('v')!r}, this build reads "
            f"{_KIND} v={SNAPSHOT_VERSION}"
        )
    if header.get("sessionId") != session_id:
        raise SnapshotRejected(f"names session {header.get('sessionId')!r}")
    body = memoryview(content)[split:]
    if header.get("bodySha256") != _digest(body):
        raise SnapshotRejected("body checksum mismatch (torn or altered)")
    size = header.get("logBytes")
    if type(size) is not int or not 0 < size <= len(log) or log[size - 1 : size] != b"\n":
        raise SnapshotRejected(f"covers {size!r} bytes, not a line boundary of the main log")
    if header.get("logSha256") != _digest(memoryview(log)[:size]):
        raise SnapshotRejected("the main log's first bytes differ from the ones it covers")
    try:
        return _restore(header, _object(body, "body"), size)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        # Only a build that wrote another layout under the same version gets here.
        raise SnapshotRejected(f"malformed body: {exc!r}") from exc


def _object(data: bytes | memoryview, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(bytes(data))
    except ValueError as exc:
        raise SnapshotRejected(f"{what} is not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise SnapshotRejected(f"{what} is not a JSON object")
    return obj


def _ints(items: object) -> list[int]:
    # set(map(type, ...)) runs in C: a snapshot's sequence columns have one item per entry.
    if not isinstance(items, list) or not set(map(type, items)) <= {int}:
        raise TypeError("expected a list of ints")
    return items


def _restore(header: dict[str, Any], body: dict[str, Any], size: int) -> Restored:
    lines = header["logLines"]
    if type(lines) is not int or lines < 1:
        raise ValueError(f"logLines {lines!r}")
    firsts, lasts = _ints(body["runFirsts"]), _ints(body["runLasts"])
    if len(firsts) != len(lasts):
        raise ValueError("runFirsts and runLasts differ in length")
    last_seq = body["lastSeq"]
    if type(last_seq) is not int or last_seq < 0:
        raise ValueError(f"lastSeq {last_seq!r}")
    boundaries = body["boundaries"]
    if not isinstance(boundaries, dict) or not set(map(type, boundaries.values())) <= {int}:
        raise TypeError("boundaries is not an object of ints")
    main = MainLog(lines, last_seq, firsts, lasts, boundaries)

    values: dict[PhysKey, tuple[str, int]] = {
        (_SESSION_KEY, ns, key): (text, seq) for ns, key, text, seq in body["values"]
    }
    lists: dict[PhysKey, list[tuple[int, str, str | None]]] = {
        (_SESSION_KEY, ns, key): list(zip(seqs, texts, tags, strict=True))
        for ns, key, seqs, texts, tags in body["lists"]
    }
    ids, parents, types, data, seqs = body["entries"]
    if not len(ids) == len(parents) == len(types) == len(data) == len(_ints(seqs)):
        raise ValueError("entry columns differ in length")
    entries = EntryTable(ids, parents, types, data, seqs)
    if len(entries.index) != len(ids):
        raise ValueError("entry ids repeat")
    usage = [UsageRow.from_json(row) for row in body["usage"]]
    stats = StorageStats(*body["stats"])
    state = MemoryState.restored(values, lists, entries, usage, stats)
    return Restored(size, main, state)
