"""One module per storage backend; each defines `make(tmp_path) -> BackendHarness`.

The conformance suite discovers every module here, so a new backend joins the suite by adding
its module and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from turnkeep.storage import Repository, Storage


@dataclass
class BackendHarness:
    """How the suite opens, reopens and tears down one backend."""

    name: str
    url: str
    repository: Callable[[], Repository]
    cleanup: Callable[[], None] = field(default=lambda: None)
    open_handles: list[Storage] = field(default_factory=list)

    def open(self, session_id: str = "s1") -> Storage:
        """Open a fresh handle (a 'reopen' when one was opened before)."""
        from turnkeep.storage import open_storage

        handle = open_storage(self.url, session_id)
        self.open_handles.append(handle)
        return handle

    def reopen(self, storage: Storage) -> Storage:
        """Close `storage` and open its session again from what was persisted."""
        storage.close()
        return self.open(storage.session_id)

    def close_all(self) -> None:
        """Close every handle the test opened."""
        for handle in self.open_handles:
            handle.close()


BackendFactory = Callable[[Path], BackendHarness]
