"""The JSONL backend with a snapshot written at every close that follows a commit, so every
reopen in the suite restores from a snapshot (docs/jsonl-format.md, Snapshot)."""

from __future__ import annotations

from pathlib import Path

from tests.conformance.backends import BackendHarness
from turnkeep.storage import jsonl, open_repository


def make(tmp_path: Path) -> BackendHarness:
    """A jsonl:// repository whose sessions snapshot on every close after any growth."""
    url = f"jsonl://{tmp_path}/jsonl-snapshot-store"
    saved = jsonl.SNAPSHOT_MIN_BYTES, jsonl.SNAPSHOT_GROWTH
    # Any growth is due: 1 byte past the snapshot, and a growth step too large to divide by.
    jsonl.SNAPSHOT_MIN_BYTES, jsonl.SNAPSHOT_GROWTH = 1, 1 << 62  # type: ignore[misc]

    def restore() -> None:
        jsonl.SNAPSHOT_MIN_BYTES, jsonl.SNAPSHOT_GROWTH = saved  # type: ignore[misc]

    return BackendHarness(
        name="jsonl_snapshot",
        url=url,
        repository=lambda: open_repository(url),
        cleanup=restore,
    )
