"""One module per envelope-store backend; each defines `make(tmp_path, clock)`, a context
manager yielding an `EnvelopeBackend` whose stores share one fresh, isolated data set.

The envelope suite (tests/conformance/test_envelope_store.py) runs on every module here, as the
storage suite does on tests/conformance/backends/: a new backend joins by adding its module.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, cast

from tests.support.envelope_stores import ManualClock, SerializedClient
from turnkeep.envelope import EnvelopeStore


class _Pokable(Protocol):
    def poke_raw(self, session_id: str, key: str, value: object) -> None: ...


@dataclass
class EnvelopeBackend:
    """How a test opens (and reopens) stores of one backend over the same data."""

    name: str
    open: Callable[[], EnvelopeStore]
    clock: ManualClock
    # Stores a text (poison) `updatedAt` for (store, session id), bypassing the store.
    write_updated_at: Callable[[EnvelopeStore, str, str], None]
    client: SerializedClient | None = None
    opened: list[EnvelopeStore] = field(default_factory=list)

    def store(self) -> EnvelopeStore:
        """A new handle on the backend's data (sharing the manual clock)."""
        handle = self.open()
        self.opened.append(handle)
        return handle

    def poke_raw(self, store: EnvelopeStore, session_id: str, key: str, value: object) -> None:
        """Store `value` bypassing validation (poison)."""
        cast(_Pokable, store).poke_raw(session_id, key, value)  # every store here has poke_raw

    def poke_updated_at(self, store: EnvelopeStore, session_id: str, value: str) -> None:
        """Store a text (poison) `updatedAt`, bypassing the store."""
        self.write_updated_at(store, session_id, value)


BACKEND_NAMES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__)))


@contextmanager
def envelope_backend(
    name: str, tmp_path: Path, clock: ManualClock | None = None
) -> Iterator[EnvelopeBackend]:
    """A fresh, isolated backend `name`; every handle it opened is closed afterwards."""
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown envelope backend {name!r}; known: {', '.join(BACKEND_NAMES)}")
    module = importlib.import_module(f"{__name__}.{name}")
    make: Callable[[Path, ManualClock], AbstractContextManager[EnvelopeBackend]] = module.make
    with make(tmp_path, clock or ManualClock()) as backend:
        try:
            yield backend
        finally:
            for handle in backend.opened:
                handle.close()
