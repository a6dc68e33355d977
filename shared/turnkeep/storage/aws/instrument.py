"""Count the AWS requests a client makes (botocore event hooks), for benchmarks and tests."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class RequestCounter:
    """Counts API calls per operation name on every client it is attached to (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()

    def attach(self, *clients: Any) -> RequestCounter:
        """Register on `clients` ("before-call": one count per API call, failed ones too)."""
        for client in clients:
            client.meta.events.register("before-call.*.*", self._count)
        return self

    def detach(self, *clients: Any) -> None:
        """Stop counting on `clients`."""
        for client in clients:
            client.meta.events.unregister("before-call.*.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[model.name] += 1

    @property
    def total(self) -> int:
        """Calls counted since the last reset."""
        with self._lock:
            return sum(self.calls.values())

    def reset(self) -> None:
        """Forget what was counted."""
        with self._lock:
            self.calls.clear()
