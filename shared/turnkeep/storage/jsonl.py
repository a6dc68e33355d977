"""jsonl:///abs/dir[?fsync=1] — session storage in append-only JSON-lines files.

Layout (docs/jsonl-format.md): `{dir}/{session_id}.jsonl` is the main log; scoped (ephemeral)
transactions go to sidecars `{dir}/{session_id}.jsonl.scopes/scope-{quote_scope_id(id)}.scope`.
Files are created by writing a `.tmp` file in the same directory and renaming it; `.tmp` files
are never read as logs and are removed on open.

Lines (one JSON object each, newline-terminated; docs/jsonl-format.md has examples):

- main header: `{"v":4,"kind":"session_header","sessionId":S,"storageVersion":1,"nextSeq":N}`
  (`nextSeq` is a floor for the next sequence).
- sidecar header: `{"v":4,"kind":"scope_header","sessionId":S,"scopeId":ID,"storageVersion":1}`.
- transaction: `{"kind":"txn",["scopeId":ID,]"seqs":[..],"ts":MS,"writes":[..]}` — one line per
  committed transaction, `seqs[i]` is the sequence of `writes[i]`. Main-log records carry no
  `scopeId`; sidecar records carry their sidecar's and are checked against it. Writes:
  `{"kind":"set","ns","key","value"}`, `{"kind":"delete","ns","key"}`,
  `{"kind":"append","ns","key","value"[,"tag"]}`, `{"kind":"delete_list","ns","key"}`; in the main
  log only also `{"kind":"scope","op":"retire","scopeId"}`, `{"kind":"entry","id","parentId",
  "type","data"}` and `{"kind":"usage","row":{..}}`.

Commit: validate against resident state, take sequences from the one resident `next_seq`,
append one line to the main log or the scope's sidecar (written and flushed to the OS with one
`write`; `fsync=1` also fsyncs the file and, on create/rename/unlink, its directory), then apply.
A failed append is truncated away and changes nothing. After a retirement commits, its sidecar
is unlinked under the same lock; an unlink failure is logged, the commit stands, and open retries
it. Open replays the main log and every sidecar in global sequence order, ignoring sidecar records
at or below their scope's latest retirement but counting every complete record toward the next
sequence; a torn final line is cut off, any other malformed line fails open with
StorageCorruptionError (see jsonl_replay.py). A snapshot `{dir}/{session_id}.jsonl.snapshot`
(jsonl_snapshot.py), written at the last close once the log has grown enough, stands for
replaying the main log's prefix it covers whenever it checks out against that prefix.

Ownership: one process owns a JSONL session. Handles opened in one process share one live session
(reference counted; the last close releases it and the next open re-reads the files), so threads
and handles of a process are safe. Several processes writing one session are NOT supported: they
would allocate the same sequences.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from typing import Final
from urllib.parse import SplitResult, parse_qsl

from turnkeep.storage import jsonl_sidecars as files
from turnkeep.storage import jsonl_snapshot as snapshots
from turnkeep.storage.addresses import Value, ValueList
from turnkeep.storage.base import ListOrder, Repository, Storage, now_ms, validate_session_id
from turnkeep.storage.blob_files import FileBlobs, remove_blobs_dir
from turnkeep.storage.blobs import BlobStore
from turnkeep.storage.errors import (
    StorageClosedError,
    StorageUnavailableError,
    StorageValidationError,
)
from turnkeep.storage.factory import path_from_url
from turnkeep.storage.jsonl_codec import encode_scope_header, encode_transaction
from turnkeep.storage.jsonl_replay import replay
from turnkeep.storage.jsonl_snapshot import MainLog
from turnkeep.storage.memory_state import MemoryState
from turnkeep.storage.records import (
    CommitResult,
    Entry,
    ListElement,
    Snapshot,
    StorageStats,
    StoredValue,
)
from turnkeep.storage.scopes import EphemeralScope, Scope
from turnkeep.storage.writes import RetireScope, Transaction

MAX_OPEN_SIDECARS: Final = 64
"""Sidecar descriptors kept open per session (least recently used ones are closed)."""
SNAPSHOT_MIN_BYTES: Final = 64 * 1024
SNAPSHOT_GROWTH: Final = 8
"""The last close writes a snapshot once the main log has grown past it by SNAPSHOT_MIN_BYTES
and by 1/SNAPSHOT_GROWTH of what it covers: a small log replays in milliseconds, and the
geometric step keeps the total bytes of snapshots written proportional to the log's size."""

log = logging.getLogger(__name__)


class JsonlSession:
    """The one live state of a session in this process; every handle on it shares it."""

    def __init__(self, directory: str, session_id: str, *, fsync: bool) -> None:
        self.directory = directory
        self.session_id = session_id
        self.main_path = files.main_path(directory, session_id)
        self.fsync = fsync
        self.refs = 0
        self.deleted = False
        loaded = replay(directory, session_id, fsync=fsync)
        self.state: MemoryState = loaded.state
        self.lock = self.state.lock
        self.main_log: MainLog = loaded.main
        """Kept current with every main-log commit, for the snapshot written at close."""
        self.snapshot_bytes = loaded.snapshot_bytes
        """Bytes of the main log the snapshot on disk covers (0: none)."""
        self._main = files.AppendFile(self.main_path)
        self._sidecars: OrderedDict[str, files.AppendFile] = OrderedDict()
        self._good_sizes: dict[str, int] = {}
        """Sizes of closed sidecars whose failed append could not be cut off yet."""

    def commit(self, txn: Transaction) -> CommitResult:
        """Check, allocate, append one line, apply; retire sidecars after the main append."""
        if self.deleted:
            raise StorageClosedError(f"session {self.session_id!r} was deleted")
        state = self.state
        state.check(txn)
        first = state.next_seq
        seqs = tuple(range(first, first + len(txn.writes)))
        ts = now_ms()
        line = encode_transaction(txn, seqs, ts)
        scope = txn.scope
        try:
            target = self._sidecar(scope.id) if isinstance(scope, EphemeralScope) else self._main
            target.append(line, fsync=self.fsync)
        except OSError as exc:
            raise StorageUnavailableError(
                f"jsonl commit to session {self.session_id!r} failed and was not applied: {exc}"
            ) from exc
        state.apply(txn, first)
        if target is self._main:
            self.main_log.add(first, seqs[-1])
        for write, seq in zip(txn.writes, seqs, strict=True):
            if isinstance(write, RetireScope):
                self.main_log.boundaries[write.scope.id] = seq
                self._remove_sidecar(write.scope.id)
        return CommitResult(first, seqs, ts, state.stats)

    def _sidecar(self, scope_id: str) -> files.AppendFile:
        handle = self._sidecars.get(scope_id)
        if handle is not None:
            self._sidecars.move_to_end(scope_id)
            return handle
        path = files.sidecar_path(self.main_path, scope_id)
        try:
            handle = files.AppendFile(path, good_size=self._good_sizes.pop(path, None))
        except FileNotFoundError:
            directory = files.scopes_dir(self.main_path)
            if not os.path.isdir(directory):
                os.makedirs(directory, exist_ok=True)
                if self.fsync:
                    files.fsync_dir(self.directory)
            header = encode_scope_header(self.session_id, scope_id)
            files.create_atomically(path, header, fsync=self.fsync)
            handle = files.AppendFile(path)
        self._sidecars[scope_id] = handle
        if len(self._sidecars) > MAX_OPEN_SIDECARS:
            _, oldest = self._sidecars.popitem(last=False)
            self._close_sidecar(oldest)
        return handle

    def _close_sidecar(self, handle: files.AppendFile) -> None:
        if handle.dirty:
            # Remember where its complete lines end so a later append cuts the garbage first.
            self._good_sizes[handle.path] = handle.size
        handle.close()

    def _remove_sidecar(self, scope_id: str) -> None:
        # Runs under the commit lock, so no later write of this scope can be in the file yet.
        handle = self._sidecars.pop(scope_id, None)
        if handle is not None:
            self._close_sidecar(handle)
        path = files.sidecar_path(self.main_path, scope_id)
        if not files.try_remove(path, why="scope retired; open retries"):
            return  # the boundary hides its records; the next open removes it if still retired
        self._good_sizes.pop(path, None)
        if self.fsync and os.path.isdir(files.scopes_dir(self.main_path)):
            try:
                files.fsync_dir(files.scopes_dir(self.main_path))
            except OSError as exc:  # the retirement is durable in the main log already
                log.warning("jsonl storage: fsync of %s failed: %s", path, exc)

    def snapshot_due(self) -> bool:
        """True when the log has grown enough past its snapshot to write a new one."""
        uncovered = self._main.size - self.snapshot_bytes
        return uncovered >= max(SNAPSHOT_MIN_BYTES, self.snapshot_bytes // SNAPSHOT_GROWTH)

    def write_snapshot(self) -> None:
        """Write the snapshot of the main log as it is now; failure is logged, never raised
        (the snapshot is a cache: the log stays the record)."""
        if self.deleted or self._main.dirty:
            return  # bytes of a failed append may follow the last complete line
        size = self._main.size
        path = files.snapshot_path(self.main_path)
        try:
            with open(self.main_path, "rb") as handle:
                prefix = handle.read(size)
            if len(prefix) != size or not prefix.endswith(b"\n"):
                raise OSError(f"main log holds {len(prefix)} bytes, expected {size} ending a line")
            content = snapshots.encode(self.session_id, prefix, self.main_log, self.state)
            # Always fsync'd (it is written rarely): a power loss then leaves this snapshot or
            # the previous one, not an empty file that would cost a full replay.
            files.create_atomically(path, content, fsync=True)
        except (OSError, ValueError) as exc:  # ValueError: text JSON cannot hold
            log.warning("jsonl storage: could not write snapshot %s: %s", path, exc)
            return
        self.snapshot_bytes = size

    def close_files(self) -> None:
        """Close every descriptor (the session is no longer usable for writes)."""
        self._main.close()
        for handle in self._sidecars.values():
            handle.close()
        self._sidecars.clear()
        # A dirty tail left now is a partial line without its newline, which the next open
        # cuts off as torn (unless only fsync and then truncation failed: outcome unknown).
        self._good_sizes.clear()


# -- process-wide registry of live sessions --------------------------------------------------

_LIVE: dict[str, JsonlSession] = {}
_REGISTRY_LOCK = threading.Lock()
"""Lock order: a session's lock before _REGISTRY_LOCK, never the reverse."""


def _acquire(directory: str, session_id: str, *, fsync: bool) -> JsonlSession:
    key = files.main_path(directory, session_id)
    with _REGISTRY_LOCK:
        session = _LIVE.get(key)
        if session is None:
            try:
                session = JsonlSession(directory, session_id, fsync=fsync)
            except OSError as exc:
                raise StorageUnavailableError(
                    f"cannot open jsonl session {session_id!r} in {directory}: {exc}"
                ) from exc
            _LIVE[key] = session
        # A handle asking for fsync upgrades the shared session; it never downgrades.
        session.fsync = session.fsync or fsync
        session.refs += 1
        return session


def _release(session: JsonlSession) -> None:
    with _REGISTRY_LOCK:
        session.refs -= 1
        if session.refs > 0:
            return
        if _LIVE.get(session.main_path) is session:
            del _LIVE[session.main_path]
        if session.snapshot_due():
            # Under the registry lock: no open of this session can replay or clean up its
            # files meanwhile.
            session.write_snapshot()
        session.close_files()


def live_session_count() -> int:
    """How many sessions this process holds open (for tests and diagnostics)."""
    with _REGISTRY_LOCK:
        return len(_LIVE)


class JsonlStorage(Storage):
    """A handle on a live JSONL session; handles of one session share its state and lock."""

    def __init__(self, session: JsonlSession) -> None:
        super().__init__(session.session_id, lock=session.lock)
        self._session = session

    @property
    def main_path(self) -> str:
        """The session's main log file."""
        return self._session.main_path

    def _commit(self, txn: Transaction) -> CommitResult:
        return self._session.commit(txn)

    def _get_value(self, address: Value) -> StoredValue | None:
        return self._session.state.get_value(address)

    def _scan_values(self, namespace: str, key_prefix: str, scope: Scope) -> list[StoredValue]:
        return self._session.state.scan_values(namespace, key_prefix, scope)

    def _read_list(
        self, address: ValueList, cursor: int | None, order: ListOrder, limit: int
    ) -> list[ListElement]:
        return self._session.state.read_list(address, cursor, order, limit)

    def _get_entries(self, ids: list[str]) -> list[Entry]:
        return self._session.state.get_entries(ids)

    def _scan_entries(self, after_seq: int | None, limit: int | None) -> list[Entry]:
        return self._session.state.scan_entries(after_seq, limit)

    def _get_stats(self) -> StorageStats:
        return self._session.state.stats

    def _snapshot(self) -> Snapshot:
        return self._session.state.snapshot()

    def _blobs(self) -> BlobStore:
        return FileBlobs(self._session.main_path, fsync=self._session.fsync)

    def _close(self) -> None:
        # Commits run synchronously under the shared lock, which close() holds: nothing to drain.
        _release(self._session)


class JsonlRepository(Repository):
    """Every JSONL session in one directory."""

    def __init__(self, directory: str, *, fsync: bool = False) -> None:
        self.directory = directory
        self.fsync = fsync

    def open(self, session_id: str) -> JsonlStorage:
        validate_session_id(session_id)
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as exc:
            raise StorageUnavailableError(
                f"cannot create jsonl directory {self.directory}: {exc}"
            ) from exc
        directory = os.path.realpath(self.directory)
        return JsonlStorage(_acquire(directory, session_id, fsync=self.fsync))

    def list_sessions(self) -> list[str]:
        names = files.list_main_files(self.directory)
        ids: list[str] = []
        for name in names:
            try:
                ids.append(validate_session_id(name))
            except StorageValidationError:
                continue  # not a file this backend wrote
        return sorted(ids)

    def delete_session(self, session_id: str) -> None:
        validate_session_id(session_id)
        key = files.main_path(os.path.realpath(self.directory), session_id)
        while True:
            with _REGISTRY_LOCK:
                session = _LIVE.get(key)
                if session is None:
                    self._remove(key)
                    return
            with session.lock, _REGISTRY_LOCK:
                if _LIVE.get(key) is not session:
                    continue  # released or replaced meanwhile: look again
                # Handles still open on it keep reading their state but can no longer write.
                del _LIVE[key]
                session.deleted = True
                session.close_files()
                self._remove(key)
                return

    @staticmethod
    def _remove(main: str) -> None:
        try:
            files.remove_session_files(main)
            remove_blobs_dir(main)
        except OSError as exc:
            raise StorageUnavailableError(f"cannot delete jsonl session {main}: {exc}") from exc


_TRUE = {"1", "true", "yes"}
_FALSE = {"0", "false", "no"}


def parse_url(url: SplitResult) -> tuple[str, bool]:
    """(directory, fsync) of `jsonl:///abs/dir[?fsync=1]`; anything else is rejected."""
    directory = path_from_url(url, what="jsonl")
    fsync = False
    if url.fragment:
        raise StorageValidationError(f"jsonl URL takes no fragment, got #{url.fragment}")
    for name, raw in parse_qsl(url.query, keep_blank_values=True):
        if name != "fsync":
            raise StorageValidationError(
                f"jsonl URL has unknown option {name!r}; the only option is fsync=0|1"
            )
        if raw.lower() in _TRUE:
            fsync = True
        elif raw.lower() in _FALSE:
            fsync = False
        else:
            raise StorageValidationError(f"jsonl URL option fsync must be 0 or 1, got {raw!r}")
    return os.path.normpath(directory), fsync


def repository_from_url(url: SplitResult) -> JsonlRepository:
    """The repository of every session in the URL's directory."""
    directory, fsync = parse_url(url)
    return JsonlRepository(directory, fsync=fsync)


def storage_from_url(url: SplitResult, session_id: str) -> JsonlStorage:
    """A handle on `session_id` in the URL's directory (created if absent)."""
    return repository_from_url(url).open(session_id)
