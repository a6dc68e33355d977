"""Helpers for the API tests: an app over in-memory storage, launchers, request helpers."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fastapi.testclient import TestClient

from turnkeep.api import ApiSettings, LocalDevAuthenticator, create_app
from turnkeep.harness import HarnessLimits, resume_turn
from turnkeep.providers.base import ModelProvider
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import Runtime, build_runtime
from turnkeep.runtime.settings import TurnkeepSettings
from turnkeep.storage import open_storage

USER = "alice"
OTHER = "mallory"


def auth(user: str = USER) -> dict[str, str]:
    """The local dev-token header of `user`."""
    return {"Authorization": f"Bearer dev-{user}"}


@dataclass
class RecordingLauncher:
    """Records launches; runs the turn inline when `run` is set; raises `fail_with` if set."""

    runtime: Runtime | None = None
    run: bool = False
    fail_with: Exception | None = None
    launched: list[tuple[str, str]] = field(default_factory=list)

    def launch(self, session_id: str, op_id: str) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.launched.append((session_id, op_id))
        if self.run and self.runtime is not None:
            resume_turn(self.runtime.deps, session_id, op_id)


@dataclass
class ApiHarness:
    """A TestClient over an app with memory storage and envelopes (unique names per test)."""

    runtime: Runtime
    launcher: RecordingLauncher
    client: TestClient

    def session(self, session_id: str | None = None, user: str = USER) -> str:
        body: dict[str, Any] = {} if session_id is None else {"session_id": session_id}
        response = self.client.post("/sessions", json=body, headers=auth(user))
        assert response.status_code == 201, response.text
        sid: str = response.json()["session_id"]
        return sid

    def start(self, session_id: str, text: str, user: str = USER) -> str:
        response = self.client.post(
            f"/sessions/{session_id}/turns", json={"text": text}, headers=auth(user)
        )
        assert response.status_code == 202, response.text
        turn_id: str = response.json()["turn_id"]
        return turn_id

    def snapshot(self, session_id: str) -> tuple[Any, ...]:
        """Everything stored for a session (envelope + entries + values), to prove no change."""
        envelope = self.runtime.envelopes.get(session_id)
        storage = open_storage(self.runtime.storage_url, session_id)
        try:
            entries = tuple((e.id, e.seq) for e in storage.scan_entries())
            stats = storage.get_stats()
        finally:
            storage.close()
        return (envelope, entries, stats)


def make_api_harness(
    *,
    run_turns: bool = True,
    provider: ModelProvider | None = None,
    settings: ApiSettings | None = None,
    turnkeep: Callable[[str], TurnkeepSettings] | None = None,
    console: bool = False,
) -> Iterator[ApiHarness]:
    """Yield an ApiHarness; closes everything afterwards (use from a fixture)."""
    name = f"api-{uuid.uuid4().hex[:10]}"
    base = (
        turnkeep(name)
        if turnkeep is not None
        else TurnkeepSettings(
            storage_url=f"memory://{name}",
            envelope_url=f"memory://{name}",
            limits=HarnessLimits(frame_interval_ms=0),
        )
    )
    runtime = build_runtime(base, provider=provider or ScriptedProvider())
    launcher = RecordingLauncher(runtime, run=run_turns)
    app = create_app(
        runtime,
        launcher,
        LocalDevAuthenticator(),
        settings=settings or ApiSettings(),
        console=console,
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        yield ApiHarness(runtime, launcher, client)
    runtime.close()
