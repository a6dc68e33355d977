"""Crash injection at the level of single storage calls: each SQLite transaction, each JSONL
file write/unlink, each AWS request.

A `CrashPlan` counts the calls that took effect and, once the target-th one has, raises
`ProcessDeath` and stays *dead*: every later call of the simulated process raises before doing
anything, so nothing the dying process would still have run (a `finally`, another thread) can
persist state. `ProcessDeath` is a `BaseException`, so no `except Exception` swallows it.

Hooks:
- SQLite: `sqlite3.connect` is patched to build connections whose `execute` reports every
  `COMMIT` (one write transaction; the storage and the envelope store both issue
  `BEGIN IMMEDIATE … COMMIT` themselves). Read-only statements are not counted: a crash after a
  read leaves the same stored state as a crash after the write before it.
- JSONL: `AppendFile.append`, `create_atomically` and `remove_file` of
  `turnkeep.storage.jsonl_sidecars` (every append, file creation and unlink goes through them).
- AWS: botocore `before-call` / `after-call` events on the clients (every request, reads
  included; a request the service refused still counts as a call).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from turnkeep.envelope import EnvelopeStore
from turnkeep.notes.tools import WORKING_NOTES_KEY
from turnkeep.storage import jsonl_sidecars


class ProcessDeath(BaseException):
    """The simulated process died (raised by a crash hook; escapes `except Exception`)."""


class CrashPlan:
    """Counts calls; dies after the `target`-th (1-based) when armed; tracks notes writes."""

    def __init__(self) -> None:
        self.target: int | None = None
        self.calls: list[str] = []
        self.dead = False
        self._lock = threading.RLock()
        self._pending_notes: list[str | None] = []
        self.notes_written: str | None = None
        """The working notes of the last envelope write that took effect (tracked, not read)."""
        self.seqs: list[int] = []
        """Every sequence a storage commit returned, across crashes and recovery."""

    def arm(self, target: int | None) -> None:
        """Start a new simulated process: count from zero, die after call `target` (None: never)."""
        with self._lock:
            self.target = target
            self.calls = []
            self.dead = False

    def before(self, label: str) -> None:
        """Called before a call: a dead process makes no more calls."""
        if self.dead:
            raise ProcessDeath(f"the process is dead (before {label})")

    def after(self, label: str, *, wrote: bool) -> None:
        """Called once a call took effect; `wrote` = it changed stored state."""
        with self._lock:
            if self.dead:
                raise ProcessDeath(f"the process is dead (after {label})")
            if wrote and self._pending_notes:
                self.notes_written = self._pending_notes[-1]
            self.calls.append(label)
            if self.target is not None and len(self.calls) >= self.target:
                self.dead = True
                raise ProcessDeath(f"crashed after call #{len(self.calls)}: {label}")

    @contextmanager
    def notes_write(self, notes: str | None) -> Iterator[None]:
        """Mark the calls inside as writing `notes` (so `notes_written` follows what landed)."""
        with self._lock:
            self._pending_notes.append(notes)
        try:
            yield
        finally:
            with self._lock:
                self._pending_notes.pop()


class _Active:
    plan: CrashPlan | None = None


ACTIVE = _Active()
"""The plan the installed hooks report to (one simulated deployment at a time per process)."""


def _before(label: str) -> None:
    if ACTIVE.plan is not None:
        ACTIVE.plan.before(label)


def _after(label: str, *, wrote: bool) -> None:
    if ACTIVE.plan is not None:
        ACTIVE.plan.after(label, wrote=wrote)


class _HookedConnection(sqlite3.Connection):
    """A connection that reports `BEGIN` (before) and `COMMIT` (after) to the active plan."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        head = sql.lstrip()[:6].upper()
        _before(f"sqlite {head.strip()}")  # a dead process runs nothing, not even a ROLLBACK
        cursor = super().execute(sql, parameters)
        if head.startswith("COMMIT"):
            _after("sqlite COMMIT", wrote=True)
        return cursor


@contextmanager
def sqlite_hooks() -> Iterator[None]:
    """Every `sqlite3.connect` made inside builds a hooked connection."""
    original = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs.setdefault("factory", _HookedConnection)
        return original(*args, **kwargs)

    sqlite3.connect = connect  # type: ignore[assignment]
    try:
        yield
    finally:
        sqlite3.connect = original


@contextmanager
def jsonl_hooks() -> Iterator[None]:
    """Every JSONL append, atomic file creation and unlink inside reports to the active plan.

    Hooked whole (not at `write_all`): a failing append truncates what it wrote, so a crash
    raised inside it would be undone by code a killed process never runs."""
    append = jsonl_sidecars.AppendFile.append
    create, remove_file = jsonl_sidecars.create_atomically, jsonl_sidecars.remove_file

    def hooked_append(self: jsonl_sidecars.AppendFile, line: bytes, *, fsync: bool) -> None:
        _before("jsonl append")
        append(self, line, fsync=fsync)
        _after("jsonl append", wrote=True)

    def hooked_create(path: str, content: bytes, *, fsync: bool) -> None:
        _before("jsonl create")
        create(path, content, fsync=fsync)
        _after("jsonl create", wrote=True)

    def hooked_remove(path: str) -> None:
        _before("jsonl unlink")
        remove_file(path)
        _after("jsonl unlink", wrote=True)

    jsonl_sidecars.AppendFile.append = hooked_append  # type: ignore[method-assign]
    jsonl_sidecars.create_atomically = hooked_create
    jsonl_sidecars.remove_file = hooked_remove
    try:
        yield
    finally:
        jsonl_sidecars.AppendFile.append = append  # type: ignore[method-assign]
        jsonl_sidecars.create_atomically = create
        jsonl_sidecars.remove_file = remove_file


_READS = ("Get", "Query", "Scan", "List", "Describe", "Head", "BatchGet")


def hook_aws_client(client: Any) -> None:
    """Report every request of a boto3 client to the active plan."""

    def before(model: Any, **_: Any) -> None:
        _before(f"{client.meta.service_model.service_name} {model.name}")

    def after(model: Any, http_response: Any = None, **_: Any) -> None:
        ok = http_response is not None and getattr(http_response, "status_code", 500) < 300
        wrote = ok and not model.name.startswith(_READS)
        _after(f"{client.meta.service_model.service_name} {model.name}", wrote=wrote)

    client.meta.events.register("before-call.*.*", before)
    client.meta.events.register("after-call.*.*", after)


@contextmanager
def active(plan: CrashPlan) -> Iterator[CrashPlan]:
    """Make `plan` the one the installed hooks report to."""
    previous = ACTIVE.plan
    ACTIVE.plan = plan
    try:
        yield plan
    finally:
        ACTIVE.plan = previous


class RecordingStorage:
    """A Storage proxy adding the sequences of every returned commit to `plan.seqs`."""

    def __init__(self, inner: Any, plan: CrashPlan) -> None:
        self._inner = inner
        self._plan = plan

    def commit(self, writes: Any, *, guard: Any = None, **options: Any) -> Any:
        result = self._inner.commit(writes, guard=guard, **options)
        with self._plan._lock:
            self._plan.seqs.extend(result.seqs)
        return result

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *_: object) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def watch_notes(store: EnvelopeStore, plan: CrashPlan) -> EnvelopeStore:
    """Make `store`'s working-notes writes visible to `plan.notes_written` (wraps the instance)."""
    update: Callable[..., Any] = store.update_worker_meta

    def update_worker_meta(session_id: str, patch: Any, **kwargs: Any) -> Any:
        if WORKING_NOTES_KEY not in patch:
            return update(session_id, patch, **kwargs)
        notes = patch[WORKING_NOTES_KEY]
        with plan.notes_write(None if notes is None else str(notes)):
            return update(session_id, patch, **kwargs)

    store.update_worker_meta = update_worker_meta  # type: ignore[method-assign]
    return store
