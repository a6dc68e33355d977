"""The JSONL backend in the conformance suite (a fresh directory per test)."""

from __future__ import annotations

from pathlib import Path

from tests.conformance.backends import BackendHarness
from turnkeep.storage import open_repository


def make(tmp_path: Path) -> BackendHarness:
    """A jsonl:// repository in the test's own temporary directory."""
    url = f"jsonl://{tmp_path}/jsonl-store"
    return BackendHarness(name="jsonl", url=url, repository=lambda: open_repository(url))
