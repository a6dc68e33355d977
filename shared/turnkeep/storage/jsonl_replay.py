"""Open/replay of a JSONL session (docs/jsonl-format.md, Open (replay)) into a MemoryState."""

from __future__ import annotations

import heapq
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from turnkeep.storage import jsonl_sidecars as files
from turnkeep.storage import jsonl_snapshot as snapshots
from turnkeep.storage.errors import EntryConflictError, StorageCorruptionError
from turnkeep.storage.jsonl_codec import (
    Record,
    RecordError,
    decode_writes,
    encode_session_header,
    parse_record,
    parse_scope_header,
    parse_session_header,
)
from turnkeep.storage.jsonl_snapshot import MainLog, Restored
from turnkeep.storage.memory_state import MemoryState
from turnkeep.storage.scopes import SESSION_SCOPE, EphemeralScope, Scope
from turnkeep.storage.writes import InsertEntry, Transaction, Write

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Txn:
    """A replayable transaction: its sequences, scope and (lazily) decoded writes."""

    record: Record
    scope: Scope
    origin: str
    line_no: int


@dataclass(slots=True)
class Replayed:
    """What open produced: resident state, the main log's summary and the files it found."""

    state: MemoryState
    main: MainLog = field(default_factory=MainLog)
    snapshot_bytes: int = 0
    """Bytes of the main log the snapshot on disk covers (0: none usable)."""
    repaired: list[str] = field(default_factory=list)


def _corrupt(path: str, line_no: int, exc: Exception) -> StorageCorruptionError:
    return StorageCorruptionError(f"{path}: line {line_no}: {exc}")


def _records(
    path: str,
    lines: list[bytes],
    scope_id: str | None,
    *,
    first_line_no: int = 2,
    previous: int = 0,
) -> Iterator[tuple[int, Record]]:
    """Parse record lines (numbered from `first_line_no`); their sequences must strictly
    increase from `previous` on."""
    for index, line in enumerate(lines):
        line_no = first_line_no + index
        try:
            record = parse_record(line)
        except RecordError as exc:
            raise _corrupt(path, line_no, exc) from exc
        if record.scope_id != scope_id:
            expected = "no scopeId" if scope_id is None else f"scopeId {scope_id!r}"
            raise _corrupt(
                path, line_no, RecordError(f"record has scopeId {record.scope_id!r}, {expected}")
            )
        if record.first <= previous:
            raise _corrupt(
                path, line_no, RecordError(f"seq {record.first} does not follow seq {previous}")
            )
        previous = record.last
        yield line_no, record


def _create_main(main: str, session_id: str, *, fsync: bool) -> None:
    files.create_atomically(main, encode_session_header(session_id, 1), fsync=fsync)


def _restore(main: str, session_id: str, log_data: bytes) -> Restored | None:
    """The snapshot of `main` if it checks out against `log_data` (the log's complete lines);
    a rejected one is removed."""
    path = files.snapshot_path(main)
    try:
        with open(path, "rb") as handle:
            content = handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("jsonl storage: cannot read snapshot %s, replaying the log: %s", path, exc)
        return None
    try:
        return snapshots.load(content, session_id, log_data)
    except snapshots.SnapshotRejected as exc:
        log.warning("jsonl storage: ignoring snapshot %s, replaying the log: %s", path, exc)
        files.try_remove(path, why="rejected snapshot")
        return None


def replay(directory: str, session_id: str, *, fsync: bool) -> Replayed:
    """Read (creating or repairing) every file of the session and rebuild its state."""
    main = files.main_path(directory, session_id)
    for temp in files.main_temp_files(main):
        files.try_remove(temp, why="leftover temp file")
    result = Replayed(MemoryState())
    # 1. Main file: create, or read and repair its torn tail.
    opened = _open_main(main, session_id, fsync=fsync, result=result)
    if opened is None:
        return result
    contents, header_next = opened
    main_txns, covered = _read_main(main, session_id, contents, result)
    high_water = max(header_next - 1, result.main.last_seq)
    # 2-4. Sidecars, each bounded by its scope's latest retirement.
    sidecar_txns, removable, high_water = _read_sidecars(
        main, session_id, covered, result, high_water
    )
    # 7. Merge by global sequence and replay, rejecting duplicates and disorder.
    _merge_and_apply(result.state, [main_txns, *sidecar_txns])
    for path in result.repaired:
        log.warning("jsonl storage: cut a torn final line (an uncommitted write) off %s", path)
    # 8. Never reuse a sequence any complete record ever held.
    result.state.next_seq = high_water + 1
    # 9. Remove sidecars with nothing after their latest retirement; failure is harmless
    #    because the boundary keeps their records out of replay.
    for path in removable:
        files.try_remove(path, why="retired scope cleanup")
    return result


def _open_main(
    main: str, session_id: str, *, fsync: bool, result: Replayed
) -> tuple[files.LogContents, int] | None:
    """The main file's lines (its torn tail repaired) and its header's next sequence; None when
    it had to be created (a new session: nothing to replay)."""
    if not os.path.exists(main):
        # Sidecars are only ever created after their main file, so a sidecar directory
        # without one is the remains of an interrupted delete: it must not come back to life.
        files.remove_scopes_dir(main)
        files.remove_snapshot(main)
        _create_main(main, session_id, fsync=fsync)
        return None
    contents = files.read_and_repair(main)
    if contents.repaired:
        result.repaired.append(main)
    if not contents.data:
        # Only a torn header: the file never held a committed transaction (rename replaces it).
        _create_main(main, session_id, fsync=fsync)
        contents = files.read_and_repair(main)
    header_end = contents.data.index(b"\n")
    try:
        header_next = parse_session_header(contents.data[:header_end], session_id)
    except RecordError as exc:
        raise _corrupt(main, 1, exc) from exc
    return contents, header_next


def _read_main(
    main: str, session_id: str, contents: files.LogContents, result: Replayed
) -> tuple[list[_Txn], MainLog]:
    """The main log's transactions after what a snapshot restored (into `result`), and the
    spans the snapshot covers; records each scope's latest retirement in `result.main`."""
    # A snapshot stands for replaying the first bytes of the log (docs/jsonl-format.md).
    restored = _restore(main, session_id, contents.data)
    covered = MainLog()
    start = contents.data.index(b"\n") + 1
    if restored is not None:
        result.state, result.main = restored.state, restored.main
        result.snapshot_bytes = start = restored.log_bytes
        covered = restored.main.copy()
    main_log = result.main
    main_txns: list[_Txn] = []
    boundaries = main_log.boundaries
    for line_no, record in _records(
        main,
        contents.lines(start),
        None,
        first_line_no=main_log.lines + 1,
        previous=main_log.last_seq,
    ):
        main_txns.append(_Txn(record, SESSION_SCOPE, main, line_no))
        main_log.add(record.first, record.last)
        # 5. Latest retirement per scope (only retirements need decoding up front).
        for item, seq in zip(record.body["writes"], record.seqs, strict=True):
            if isinstance(item, dict) and item.get("kind") == "scope":
                scope_id = item.get("scopeId")
                if isinstance(scope_id, str):
                    boundaries[scope_id] = seq
    return main_txns, covered


def _read_sidecars(
    main: str, session_id: str, covered: MainLog, result: Replayed, high_water: int
) -> tuple[list[list[_Txn]], list[str], int]:
    """Each sidecar's records after its scope's latest retirement (identity validated, torn
    tails repaired), the sidecars left with none, and the high-water of every record seen."""
    sidecars, temps = files.discover(main)
    for temp in temps:
        files.try_remove(temp, why="leftover temp file")
    streams: list[list[_Txn]] = []
    removable: list[str] = []
    for sidecar in sidecars:
        contents = files.read_and_repair(sidecar.path)
        if contents.repaired:
            result.repaired.append(sidecar.path)
        lines = contents.lines()
        if not lines:
            # A header-less file can hold no committed record (records follow the header).
            removable.append(sidecar.path)
            continue
        try:
            scope_id = parse_scope_header(lines[0], session_id, sidecar.quoted_id)
        except RecordError as exc:
            raise _corrupt(sidecar.path, 1, exc) from exc
        kept, high_water = _kept_records(
            sidecar.path,
            lines[1:],
            scope_id,
            boundary=result.main.boundaries.get(scope_id, 0),
            covered=covered,
            high_water=high_water,
        )
        if kept:
            streams.append(kept)
        else:
            removable.append(sidecar.path)
    return streams, removable, high_water


def _kept_records(
    path: str,
    lines: list[bytes],
    scope_id: str,
    *,
    boundary: int,
    covered: MainLog,
    high_water: int,
) -> tuple[list[_Txn], int]:
    """One sidecar's records after `boundary` (its scope's latest retirement), and the
    high-water raised by every complete record, kept or not."""
    scope = EphemeralScope(scope_id)
    kept: list[_Txn] = []
    for line_no, record in _records(path, lines, scope_id):
        # 4. Every complete record counts toward the high-water, kept or not.
        high_water = max(high_water, record.last)
        if record.first > boundary:
            if covered.holds_any(record.first, record.last):
                # The snapshot's records are not merged below: check against their spans.
                raise _corrupt(
                    path,
                    line_no,
                    RecordError(f"seq {record.first} is held by a record of the main log too"),
                )
            kept.append(_Txn(record, scope, path, line_no))
        elif record.last > boundary:
            raise _corrupt(
                path,
                line_no,
                RecordError(f"transaction {record.seqs} straddles retirement {boundary}"),
            )
    return kept, high_water


def _merge_and_apply(state: MemoryState, streams: list[list[_Txn]]) -> None:
    """Apply every stream's transactions in global sequence order; a sequence at or below one
    already applied (from another file) is corruption."""
    previous = 0
    # Most sessions replay the main log alone: no merge needed for one stream.
    merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=_first_seq)
    for txn in merged:
        record = txn.record
        if record.first <= previous:
            raise _corrupt(
                txn.origin,
                txn.line_no,
                RecordError(f"seq {record.first} is not above seq {previous} of another file"),
            )
        previous = record.last
        _apply(state, txn)


def _first_seq(txn: _Txn) -> int:
    return txn.record.first


def _apply(state: MemoryState, txn: _Txn) -> None:
    try:
        writes: list[Write] = decode_writes(txn.record, txn.scope)
    except RecordError as exc:
        raise _corrupt(txn.origin, txn.line_no, exc) from exc
    entry_ids = tuple(w.id for w in writes if isinstance(w, InsertEntry))
    if entry_ids:
        # Replay must not build a tree the commit path would have rejected.
        try:
            if len(set(entry_ids)) != len(entry_ids):
                raise EntryConflictError(f"entry ids repeat within one transaction: {entry_ids}")
            state.check(Transaction(SESSION_SCOPE, tuple(writes), entry_ids))
        except EntryConflictError as exc:
            raise _corrupt(txn.origin, txn.line_no, exc) from exc
    for write, seq in zip(writes, txn.record.seqs, strict=True):
        state.apply_write(write, seq)
