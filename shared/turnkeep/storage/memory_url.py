"""URL entry points of the memory backend (`memory://[name]`)."""

from __future__ import annotations

from urllib.parse import SplitResult

from turnkeep.storage.memory import MemoryRepository, MemoryStorage, memory_repository


def repository_from_url(url: SplitResult) -> MemoryRepository:
    """The process-wide repository named by the URL's host part."""
    return memory_repository(url.netloc)


def storage_from_url(url: SplitResult, session_id: str) -> MemoryStorage:
    """A handle on the session in the process-wide repository."""
    return memory_repository(url.netloc).open(session_id)
