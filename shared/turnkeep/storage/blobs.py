"""A session's blobs: the bytes of its attachments, stored with the session on every backend
and deleted with it (docs/attachments.md, docs/storage.md "Blobs").

Each backend hands out a `BlobStore` (`Storage.blobs()`): memory keeps bytes in the session's
resident state, JSONL in files beside the session's log, SQLite in a table of the same file
(with `secure_delete`), AWS as S3 objects under the session's prefix.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Final

from turnkeep.storage.errors import StorageValidationError

BLOB_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A blob's name: an attachment id such as `att-…` (no slashes: it is a file or key name)."""


def validate_blob_name(name: object) -> str:
    """`name` if it is a valid blob name, else StorageValidationError naming it."""
    if not isinstance(name, str) or BLOB_NAME.fullmatch(name) is None or ".." in name:
        raise StorageValidationError(
            f"blob name {name!r} must be 1-128 letters, digits, '.', '_' or '-' (no '..')"
        )
    return name


@dataclass(frozen=True, slots=True)
class UploadForm:
    """A presigned upload straight to the store (S3 POST): the client sends `fields` and then
    the file as multipart form data to `url`; the policy pins the key, the exact length and
    the content type, so the store itself refuses anything else."""

    url: str
    fields: dict[str, str] = field(default_factory=dict)
    expires_at_ms: int = 0


@dataclass(frozen=True, slots=True)
class BlobLocation:
    """Where a blob's bytes live for a service that reads them itself (Bedrock's `s3Location`):
    the object's `s3://bucket/key` URI and the region of its bucket."""

    uri: str
    region: str


class BlobStore(ABC):
    """Put, get and delete a session's blobs by name; names are validated here."""

    def put(self, name: str, data: bytes) -> None:
        """Store `data` as blob `name`, replacing any blob of that name."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise StorageValidationError(f"blob {name!r} data must be bytes")
        self._put(validate_blob_name(name), bytes(data))

    def get(self, name: str) -> bytes | None:
        """The bytes of blob `name`, or None when there is none."""
        return self._get(validate_blob_name(name))

    def delete(self, name: str) -> None:
        """Delete blob `name` (deleting a missing blob is fine)."""
        self._delete(validate_blob_name(name))

    def names(self) -> list[str]:
        """Every blob's name, sorted."""
        return sorted(self._names())

    def upload_form(
        self, name: str, *, size: int, media_type: str, expires_in: int
    ) -> UploadForm | None:
        """A presigned direct upload of exactly `size` bytes of `media_type`, or None where the
        client uploads through the API instead (the local backends)."""
        validate_blob_name(name)
        return None

    def location(self, name: str) -> BlobLocation | None:
        """The S3 location of blob `name` where the store is S3, else None (the local
        backends). The blob is not read, so it is not checked to exist either."""
        validate_blob_name(name)
        return None

    def settle(self, name: str) -> None:
        """Blob `name`, uploaded through `upload_form`, was checked and is kept: drop what marks
        it an unchecked upload (S3: the tag its lifecycle rule expires). Nothing locally."""
        validate_blob_name(name)

    @abstractmethod
    def _put(self, name: str, data: bytes) -> None: ...

    @abstractmethod
    def _get(self, name: str) -> bytes | None: ...

    @abstractmethod
    def _delete(self, name: str) -> None: ...

    @abstractmethod
    def _names(self) -> list[str]: ...


class DictBlobs(BlobStore):
    """Blobs held in a dict the session's resident state owns (memory://)."""

    def __init__(self, blobs: dict[str, bytes]) -> None:
        self._blobs = blobs

    def _put(self, name: str, data: bytes) -> None:
        self._blobs[name] = data

    def _get(self, name: str) -> bytes | None:
        return self._blobs.get(name)

    def _delete(self, name: str) -> None:
        self._blobs.pop(name, None)

    def _names(self) -> list[str]:
        return list(self._blobs)
