"""JSONL sessions' blobs: one file per blob in `{session}.attachments/` beside the session's
log, written atomically and removed with the session (docs/storage.md "Blobs")."""

from __future__ import annotations

import contextlib
import os
import shutil

from turnkeep.storage.blobs import BlobStore
from turnkeep.storage.errors import StorageUnavailableError
from turnkeep.storage.jsonl_sidecars import MAIN_SUFFIX, TEMP_SUFFIX, create_atomically

BLOBS_SUFFIX = ".attachments"


def blobs_dir(main: str) -> str:
    """The blob directory of the session whose main log is `main`."""
    return main.removesuffix(MAIN_SUFFIX) + BLOBS_SUFFIX


def remove_blobs_dir(main: str) -> None:
    """Delete the session's blob directory recursively; absent is fine."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(blobs_dir(main))


class FileBlobs(BlobStore):
    """Blobs of one JSONL session as files."""

    def __init__(self, main: str, *, fsync: bool) -> None:
        self._dir = blobs_dir(main)
        self._fsync = fsync

    def _put(self, name: str, data: bytes) -> None:
        try:
            os.makedirs(self._dir, exist_ok=True)
            create_atomically(os.path.join(self._dir, name), data, fsync=self._fsync)
        except OSError as exc:
            raise StorageUnavailableError(f"cannot store blob {name!r}: {exc}") from exc

    def _get(self, name: str) -> bytes | None:
        try:
            with open(os.path.join(self._dir, name), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageUnavailableError(f"cannot read blob {name!r}: {exc}") from exc

    def _names(self) -> list[str]:
        try:
            return [
                entry.name
                for entry in os.scandir(self._dir)
                if entry.is_file(follow_symlinks=False) and not entry.name.endswith(TEMP_SUFFIX)
            ]
        except FileNotFoundError:
            return []

    def _delete(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self._dir, name))
