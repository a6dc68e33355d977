"""Helpers for the turn tests: deps on a chosen backend, a fake clock, fault-injecting wrappers."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnkeep.envelope import EnvelopeStore, open_envelope_store
from turnkeep.harness import HarnessDeps, HarnessLimits
from turnkeep.harness.state import (
    CHECKPOINT_NS,
    MEMO_NS,
    frames_address,
    load_head,
    op_scope,
    response_id,
)
from turnkeep.harness.transcript import branch_messages
from turnkeep.providers.base import (
    Message,
    ModelProvider,
    ModelRequest,
    StreamEvent,
)
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import CommitResult, Storage, Value, Write, open_storage
from turnkeep.tools.base import Tool

USER = "user-1"


class SimulatedCrash(BaseException):
    """A process death: escapes every `except Exception`."""


@dataclass
class FakeClock:
    """A clock that only moves when told to."""

    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class RecordingProvider(ModelProvider):
    """Wraps a provider; records every request; can crash after N events of chosen rounds."""

    inner: ModelProvider = field(default_factory=ScriptedProvider)
    requests: list[ModelRequest] = field(default_factory=list)
    crash_after: dict[int, int] = field(default_factory=dict)
    """call number (0-based) -> events to yield before crashing"""
    crash_with: Callable[[], BaseException] = SimulatedCrash
    name: str = "recording"

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        number = len(self.requests)
        self.requests.append(request)
        limit = self.crash_after.get(number)
        for index, event in enumerate(self.inner.stream(request)):
            if limit is not None and index >= limit:
                raise self.crash_with()
            yield event


class StorageProxy:
    """Delegates to a Storage; `before_commit(writes)` may raise or act first (fault injection)."""

    def __init__(self, inner: Storage, before_commit: Callable[[Sequence[Write]], None]) -> None:
        self._inner = inner
        self._before_commit = before_commit
        self.committed: list[Sequence[Write]] = []

    def commit(
        self, writes: Sequence[Write], *, guard: Value | None = None, **options: Any
    ) -> CommitResult:
        self._before_commit(writes)
        result = self._inner.commit(writes, guard=guard, **options)
        self.committed.append(writes)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass
class Harness:
    """One session on one backend, ready to run turns."""

    deps: HarnessDeps
    envelopes: EnvelopeStore
    storage_url: str
    session_id: str
    clock: FakeClock
    provider: RecordingProvider

    def storage(self) -> Storage:
        return open_storage(self.storage_url, self.session_id)

    def transcript(self) -> list[Message]:
        with self.storage() as storage:
            return branch_messages(storage, load_head(storage))

    def meta(self) -> dict[str, Any]:
        envelope = self.envelopes.get(self.session_id)
        assert envelope is not None
        return dict(envelope.meta)

    def scope_residue(self, op_id: str, rounds: int = 8) -> int:
        """Frames, checkpoints and memos still stored in the operation's scope."""
        with self.storage() as storage:
            left = sum(
                len(storage.read_list(frames_address(op_id, response_id(op_id, r))))
                for r in range(rounds)
            )
            for namespace in (CHECKPOINT_NS, MEMO_NS):
                left += len(storage.scan_values(namespace, "", op_scope(op_id)))
            return left


def storage_url_for(backend: str, tmp_path: Path) -> str:
    """A fresh storage URL of `backend` ('memory' or 'sqlite')."""
    if backend == "memory":
        return f"memory://{uuid.uuid4().hex}"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'turns.db'}"
    raise ValueError(backend)


def make_turn_harness(
    tmp_path: Path,
    backend: str = "memory",
    *,
    limits: HarnessLimits | None = None,
    tools: Sequence[Tool[Any]] | None = None,
    provider: RecordingProvider | None = None,
    open_wrapper: Callable[[Storage], Any] | None = None,
) -> Harness:
    """Deps on `backend` with a fake clock, a recording scripted provider and a new session."""
    storage_url = storage_url_for(backend, tmp_path)
    envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
    session_id = f"s-{uuid.uuid4().hex[:10]}"
    envelopes.create(session_id, USER)
    clock = FakeClock()
    recorder = provider or RecordingProvider()

    def opener(sid: str) -> Storage:
        storage = open_storage(storage_url, sid)
        return open_wrapper(storage) if open_wrapper is not None else storage  # type: ignore[no-any-return]

    kwargs: dict[str, Any] = {}
    if tools is not None:
        extra = list(tools)
        kwargs["tools"] = lambda _s, _u: extra
    deps = HarnessDeps(
        open_storage=opener,
        envelopes=envelopes,
        provider=recorder,
        clock=clock,
        limits=limits or HarnessLimits(frame_interval_ms=0),
        **kwargs,
    )
    return Harness(deps, envelopes, storage_url, session_id, clock, recorder)
