"""Files of the JSONL backend: naming, atomic creation, torn-tail repair, appends, cleanup.

Paths: main log `{dir}/{session_id}.jsonl`; its snapshot `{main}.snapshot`; sidecar directory
`{main}.scopes/`; sidecar `scope-{quote_scope_id(id)}.scope`. Temporary files end in `.tmp` and
are never discovered.
Module-level `write_all` and `remove_file` are the only write/unlink primitives, so tests can
inject failures without touching `os` globally.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Final

from turnkeep.storage.scopes import quote_scope_id

MAIN_SUFFIX: Final = ".jsonl"
SCOPES_SUFFIX: Final = ".scopes"
SNAPSHOT_SUFFIX: Final = ".snapshot"
SIDECAR_PREFIX: Final = "scope-"
SIDECAR_SUFFIX: Final = ".scope"
TEMP_SUFFIX: Final = ".tmp"

log = logging.getLogger(__name__)


def main_path(directory: str, session_id: str) -> str:
    """The main log of `session_id` (the id is validated by the caller)."""
    return os.path.join(directory, session_id + MAIN_SUFFIX)


def scopes_dir(main: str) -> str:
    """The sidecar directory owned by main log `main`."""
    return main + SCOPES_SUFFIX


def snapshot_path(main: str) -> str:
    """The snapshot of main log `main` (docs/jsonl-format.md, Snapshot)."""
    return main + SNAPSHOT_SUFFIX


def sidecar_path(main: str, scope_id: str) -> str:
    """The sidecar of `scope_id`; the fixed prefix keeps encoded '.'/'..' from being a path."""
    return os.path.join(
        scopes_dir(main), SIDECAR_PREFIX + quote_scope_id(scope_id) + SIDECAR_SUFFIX
    )


def quoted_id_of_sidecar(name: str) -> str | None:
    """The quoted scope id inside a sidecar file name, or None if `name` is not a sidecar."""
    if name.startswith(SIDECAR_PREFIX) and name.endswith(SIDECAR_SUFFIX):
        quoted = name[len(SIDECAR_PREFIX) : -len(SIDECAR_SUFFIX)]
        return quoted or None
    return None


def fsync_dir(directory: str) -> None:
    """Make a rename/unlink/create in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (raises OSError; may leave a partial write)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def remove_file(path: str) -> None:
    """Unlink `path` (raises FileNotFoundError if absent)."""
    os.unlink(path)


def create_atomically(path: str, content: bytes, *, fsync: bool) -> None:
    """Create `path` holding `content` via a `.tmp` file in the same directory + rename."""
    directory, name = os.path.split(path)
    temp = os.path.join(directory, f"{name}.{uuid.uuid4().hex}{TEMP_SUFFIX}")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            write_all(fd, content)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if fsync:
        fsync_dir(directory)


@dataclass(slots=True)
class LogContents:
    """The complete lines of a log file and whether a torn tail was cut off."""

    data: bytes
    """The complete lines, each ending in a newline (the repaired file's content)."""
    repaired: bool

    def lines(self, start: int = 0) -> list[bytes]:
        """The lines from byte offset `start` (a line start) on, without their newlines."""
        lines = self.data[start:].split(b"\n")
        lines.pop()  # the empty string after the final newline
        return lines


def read_and_repair(path: str) -> LogContents:
    """Read a log; a final line without its newline is a torn write: truncate it away."""
    with open(path, "rb") as handle:
        data = handle.read()
    end = data.rfind(b"\n") + 1
    repaired = end != len(data)
    if repaired:
        # Discarded bytes never committed (a commit returns only after its newline landed).
        os.truncate(path, end)
        data = data[:end]
    return LogContents(data, repaired)


class AppendFile:
    """An open log file that appends whole lines; a failed append is cut back off."""

    def __init__(self, path: str, *, good_size: int | None = None) -> None:
        """Open an existing file for appending (FileNotFoundError if it does not exist).

        `good_size` is the known length of its complete lines when an earlier handle closed
        with an uncut failed append; the next append cuts the file back to it first.
        """
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND)
        self.size = os.fstat(self._fd).st_size if good_size is None else good_size
        self._dirty = good_size is not None

    @property
    def dirty(self) -> bool:
        """True while bytes of a failed append may still follow the last complete line."""
        return self._dirty

    def append(self, line: bytes, *, fsync: bool) -> None:
        """Append `line` (flushed to the OS; fsync'd if asked) or raise leaving no trace of it."""
        fd = self._fd
        if fd is None:
            raise OSError(f"{self.path} is closed")
        if self._dirty:
            # An earlier failed append may have left bytes whose truncation failed too.
            os.ftruncate(fd, self.size)
            self._dirty = False
        try:
            write_all(fd, line)
            if fsync:
                os.fsync(fd)
        except BaseException:
            self._dirty = True
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self.size)
                self._dirty = False
            raise
        self.size += len(line)

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


@dataclass(frozen=True, slots=True)
class SidecarFile:
    """A discovered sidecar: its path and the quoted scope id in its name."""

    path: str
    quoted_id: str


def discover(main: str) -> tuple[list[SidecarFile], list[str]]:
    """Sidecars and leftover temp files in `{main}.scopes`; other files are ignored."""
    directory = scopes_dir(main)
    sidecars: list[SidecarFile] = []
    temps: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return sidecars, temps
    for entry in entries:
        if not entry.is_file(follow_symlinks=False):
            continue
        if entry.name.endswith(TEMP_SUFFIX):
            temps.append(entry.path)
            continue
        quoted = quoted_id_of_sidecar(entry.name)
        if quoted is not None:
            sidecars.append(SidecarFile(entry.path, quoted))
    sidecars.sort(key=lambda s: s.quoted_id)
    return sidecars, temps


def main_temp_files(main: str) -> list[str]:
    """Leftover temp files of an interrupted main-file creation."""
    directory, name = os.path.split(main)
    prefix = name + "."
    try:
        return [
            e.path
            for e in os.scandir(directory)
            if e.name.startswith(prefix) and e.name.endswith(TEMP_SUFFIX)
        ]
    except FileNotFoundError:
        return []


def try_remove(path: str, *, why: str) -> bool:
    """Best-effort unlink; a failure is logged and reported, never raised."""
    try:
        remove_file(path)
    except FileNotFoundError:
        return True
    except OSError as exc:
        log.warning("jsonl storage: could not remove %s (%s): %s", path, why, exc)
        return False
    return True


def list_main_files(directory: str) -> list[str]:
    """Names (without suffix) of regular `*.jsonl` files in `directory`."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    names: list[str] = []
    for entry in entries:
        if entry.name.endswith(MAIN_SUFFIX) and entry.is_file(follow_symlinks=False):
            names.append(entry.name[: -len(MAIN_SUFFIX)])
    return names


def remove_session_files(main: str) -> None:
    """Delete the main log, then its snapshot and the sidecar directory recursively; absent
    parts are fine."""
    with contextlib.suppress(FileNotFoundError):
        remove_file(main)
    for temp in main_temp_files(main):
        with contextlib.suppress(FileNotFoundError):
            remove_file(temp)
    remove_snapshot(main)
    remove_scopes_dir(main)


def remove_snapshot(main: str) -> None:
    """Delete the snapshot of `main` if there is one (raises other OSErrors)."""
    snapshot = snapshot_path(main)
    # Probed first so that sessions without a snapshot make no unlink call at all.
    if os.path.lexists(snapshot):
        with contextlib.suppress(FileNotFoundError):
            remove_file(snapshot)


def remove_scopes_dir(main: str) -> None:
    """Delete the sidecar directory of `main` recursively; absent is fine."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(scopes_dir(main))
