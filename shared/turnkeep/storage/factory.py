"""open_storage / open_repository: pick a backend from a storage URL.

memory://[name]                      in-process
jsonl:///abs/dir                     {dir}/{session_id}.jsonl + {main}.scopes/
sqlite:///abs/file.db                one file may hold many sessions
aws://?table=T&bucket=B&prefix=P     DynamoDB main log + S3 scoped progress
"""

from __future__ import annotations

import importlib
from typing import Protocol, cast
from urllib.parse import SplitResult, unquote, urlsplit

from turnkeep.storage.base import Repository, Storage
from turnkeep.storage.errors import StorageValidationError

_BACKENDS: dict[str, str] = {
    "memory": "turnkeep.storage.memory_url",
    "jsonl": "turnkeep.storage.jsonl",
    "sqlite": "turnkeep.storage.sqlite",
    "aws": "turnkeep.storage.aws",
}


class _BackendModule(Protocol):
    def repository_from_url(self, url: SplitResult) -> Repository: ...

    def storage_from_url(self, url: SplitResult, session_id: str) -> Storage: ...


def _backend(url: str) -> tuple[_BackendModule, SplitResult]:
    if not isinstance(url, str):
        raise StorageValidationError(f"storage URL must be a string, got {type(url).__name__}")
    parts = urlsplit(url)
    module_name = _BACKENDS.get(parts.scheme)
    if module_name is None:
        raise StorageValidationError(
            f"storage URL {url!r} has unknown scheme {parts.scheme!r}; "
            f"use one of: {', '.join(s + '://' for s in _BACKENDS)}"
        )
    return cast(_BackendModule, importlib.import_module(module_name)), parts


def open_storage(url: str, session_id: str) -> Storage:
    """Open the storage of `session_id` at `url`; the handle owns what it opened."""
    module, parts = _backend(url)
    return module.storage_from_url(parts, session_id)


def open_repository(url: str) -> Repository:
    """Open the repository (every session) at `url`."""
    module, parts = _backend(url)
    return module.repository_from_url(parts)


def path_from_url(url: SplitResult, *, what: str) -> str:
    """The absolute filesystem path of a file-backed URL (`scheme:///abs/path`)."""
    if url.netloc not in ("", "localhost"):
        raise StorageValidationError(f"{what} URL must look like {url.scheme}:///absolute/path")
    path = unquote(url.path)
    if not path.startswith("/"):
        raise StorageValidationError(f"{what} URL needs an absolute path, got {path!r}")
    return path
