"""What the envelope backends of the tests share (tests/conformance/envelope_backends/).

Every store gets a `ManualClock` so timestamp rules are tested without sleeping. DynamoDB runs
on moto; `SerializedClient` makes each request atomic the way DynamoDB does (moto alone is not
thread-safe), so concurrency tests exercise request interleavings, not moto's internals.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import boto3

REGION = "us-east-1"


class ManualClock:
    """A clock that returns `now` (ms) until a test moves it."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class TickingClock(ManualClock):
    """A thread-safe clock that moves 1000 ms forward on every read (distinct, increasing)."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        super().__init__(now)
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            self.now += 1000
            return self.now


class SerializedClient:
    """A boto3 client proxy: one request at a time, and a log of (operation, params)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.before: Callable[[str, dict[str, Any]], None] | None = None

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._client, name)
        if name in ("get_paginator", "close", "meta", "exceptions") or not callable(target):
            return target

        def call(**kwargs: Any) -> Any:
            if self.before is not None:
                self.before(name, kwargs)
            with self._lock:
                self.calls.append((name, kwargs))
                return target(**kwargs)

        return call


_CLIENT: list[Any] = []


def moto_dynamodb_client() -> Any:
    """One process-wide DynamoDB client (building a client costs ~0.1 s; moto intercepts it
    whenever a mock is active). Explicit fake credentials: no real account is ever reached."""
    if not _CLIENT:
        _CLIENT.append(
            boto3.client(
                "dynamodb",
                region_name=REGION,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )
        )
    return _CLIENT[0]
