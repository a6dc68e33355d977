"""Envelope stores for tests: one factory per backend (memory, SQLite, DynamoDB on moto).

Every store gets a `ManualClock` so timestamp rules are tested without sleeping. DynamoDB runs
on moto; `SerializedClient` makes each request atomic the way DynamoDB does (moto alone is not
thread-safe), so concurrency tests exercise request interleavings, not moto's internals.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from tests.support.aws_template import create_table
from turnkeep.envelope import EnvelopeStore
from turnkeep.envelope.dynamodb import DynamoEnvelopeStore
from turnkeep.envelope.memory import MemoryEnvelopeState, MemoryEnvelopeStore
from turnkeep.envelope.sqlite import SqliteEnvelopeStore

REGION = "us-east-1"
BACKEND_NAMES = ("memory", "sqlite", "dynamodb")


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


@dataclass
class EnvelopeBackend:
    """How a test opens (and reopens) stores of one backend over the same data."""

    name: str
    open: Callable[[], EnvelopeStore]
    clock: ManualClock
    client: SerializedClient | None = None
    opened: list[EnvelopeStore] = field(default_factory=list)

    def store(self) -> EnvelopeStore:
        """A new handle on the backend's data (sharing the manual clock)."""
        handle = self.open()
        self.opened.append(handle)
        return handle

    def poke_raw(self, store: EnvelopeStore, session_id: str, key: str, value: object) -> None:
        """Store `value` bypassing validation (poison)."""
        assert isinstance(store, MemoryEnvelopeStore | SqliteEnvelopeStore | DynamoEnvelopeStore)
        store.poke_raw(session_id, key, value)

    def poke_updated_at(self, store: EnvelopeStore, session_id: str, value: str) -> None:
        """Store a text (poison) `updatedAt`, bypassing the store."""
        if isinstance(store, MemoryEnvelopeStore):
            with store.state.lock:
                store.state.rows[session_id].updated_at = value
        elif isinstance(store, SqliteEnvelopeStore):
            with store._write() as conn:
                conn.execute(
                    "UPDATE envelopes SET updated_at = ? WHERE session_id = ?", (value, session_id)
                )
        else:
            assert isinstance(store, DynamoEnvelopeStore)
            store.client.update_item(
                TableName=store.table,
                Key={"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": "ENVELOPE"}},
                UpdateExpression="SET updatedAt = :v",
                ExpressionAttributeValues={":v": {"S": value}},
            )


@contextmanager
def envelope_backend(
    name: str, tmp_path: Path, clock: ManualClock | None = None
) -> Iterator[EnvelopeBackend]:
    """A fresh, isolated backend `name`; every handle it opened is closed afterwards."""
    clock = clock or ManualClock()
    backend: EnvelopeBackend
    if name == "memory":
        state = MemoryEnvelopeState()
        backend = EnvelopeBackend(name, lambda: MemoryEnvelopeStore(state, clock=clock), clock)
        yield from _run(backend)
    elif name == "sqlite":
        path = str(tmp_path / f"envelopes-{uuid.uuid4().hex[:8]}.db")
        backend = EnvelopeBackend(name, lambda: SqliteEnvelopeStore(path, clock=clock), clock)
        yield from _run(backend)
    elif name == "dynamodb":
        with mock_aws():
            raw = moto_dynamodb_client()
            table = f"turnkeep-{uuid.uuid4().hex[:12]}"
            create_table(raw, table)
            client = SerializedClient(raw)
            backend = EnvelopeBackend(
                name,
                lambda: DynamoEnvelopeStore(client, table, clock=clock),  # type: ignore[arg-type]
                clock,
                client=client,
            )
            yield from _run(backend)
    else:
        raise ValueError(f"unknown envelope backend {name!r}")


def _run(backend: EnvelopeBackend) -> Iterator[EnvelopeBackend]:
    try:
        yield backend
    finally:
        for handle in backend.opened:
            handle.close()
