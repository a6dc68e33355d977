"""The SQLite backend in the conformance suite: one database file per test, shared by sessions."""

from __future__ import annotations

from pathlib import Path

from tests.conformance.backends import BackendHarness
from turnkeep.storage import open_repository


def make(tmp_path: Path) -> BackendHarness:
    """A fresh sqlite:/// file under the test's tmp_path."""
    url = f"sqlite://{tmp_path / 'conformance.db'}"
    return BackendHarness(name="sqlite", url=url, repository=lambda: open_repository(url))
