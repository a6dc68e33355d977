"""What the handles of one session in one repository share (lock, head, scope caches), and the
one translation of AWS transport and service failures into the storage's error."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from botocore.exceptions import BotoCoreError, ClientError

from turnkeep.plumbing.dynamodb_batches import UnprocessedError
from turnkeep.storage.aws.head import Head
from turnkeep.storage.aws.scoped import ObjectWrites, ScopeView
from turnkeep.storage.errors import StorageUnavailableError


@dataclass
class SessionState:
    """What the handles of one session in one repository share: lock, head and scope caches."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    head: Head | None = None
    """The head as this process last saw it; None forces a read before the next commit."""
    done: set[str] = field(default_factory=set)
    """Cleanup markers whose deletion finished; removed from the head by the next commit."""
    views: dict[str, ScopeView] = field(default_factory=dict)
    bodies: dict[str, ObjectWrites] = field(default_factory=dict)
    """Scoped objects this process wrote or read, by key (objects are immutable)."""
    refs: int = 0
    recovered: bool = False

    def observe(self, head: Head, *, expected: int | None) -> None:
        """Adopt `head`; drop loaded scopes when another writer may have moved it meanwhile.

        `expected` is the `last_seq` the head has if only this process allocated since it last
        looked (None: unknown). Any other allocation may be another process's scoped write or
        retirement, which a loaded scope view would never show or apply: such views are read
        afresh on their next use (cached object bodies are kept; they are immutable).
        """
        if expected is None or head.last_seq != expected:
            self.views.clear()
        self.head = head

    def forget(self) -> None:
        """Drop every cache (the session was deleted or must be read afresh)."""
        self.head = None
        self.done.clear()
        self.views.clear()
        self.bodies.clear()


@contextmanager
def aws_call(what: str) -> Iterator[None]:
    """Turn transport and service failures into StorageUnavailableError naming `what`."""
    try:
        yield
    except (BotoCoreError, ClientError, UnprocessedError) as exc:
        raise StorageUnavailableError(f"{what} failed: {exc}") from exc
