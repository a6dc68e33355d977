"""Helpers shared by the storage conformance tests (public storage API only)."""

from __future__ import annotations

from collections.abc import Iterator

from tests.conformance.backends import BackendHarness
from turnkeep.storage import Storage


def now_and_after_reopen(backend: BackendHarness, storage: Storage) -> Iterator[Storage]:
    """Yield `storage`, then (lazily, after the caller checked it) a reopened handle."""
    yield storage
    yield backend.reopen(storage)
