"""The memory backend in the conformance suite (a fresh named repository per test)."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.conformance.backends import BackendHarness
from turnkeep.storage import open_repository


def make(tmp_path: Path) -> BackendHarness:
    """A memory:// repository no other test shares."""
    url = f"memory://conformance-{uuid.uuid4().hex}"
    return BackendHarness(name="memory", url=url, repository=lambda: open_repository(url))
