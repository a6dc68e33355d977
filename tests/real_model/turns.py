"""Driving turns of a real `turnkeep serve` over HTTP: start one, follow its event stream."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from turnkeep.cli.sse import SseEvent, read_sse

USER = "alice"


def api(url: str) -> httpx.Client:
    """A client of the API at `url` as the dev user (generous timeout: CPU inference)."""
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer dev-{USER}"}, timeout=120)


@dataclass
class Followed:
    """A turn's event stream as the client saw it, up to its `end`."""

    turn_id: str
    events: list[SseEvent] = field(default_factory=list)

    @property
    def end(self) -> dict[str, Any]:
        ends = [e.data for e in self.events if e.kind == "end"]
        assert ends, f"the stream of {self.turn_id} ended without an `end` event: {self.kinds}"
        data: dict[str, Any] = ends[-1]
        return data

    @property
    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def deltas(self, round_no: int = 0) -> list[str]:
        """The live text pieces of round `round_no`'s reply."""
        rid = f"{self.turn_id}:r{round_no}"
        return [
            e.data["text"]
            for e in self.events
            if e.kind == "delta" and e.data["response_id"] == rid
        ]

    def reply(self, round_no: int = 0) -> str:
        """The settled text of round `round_no`'s reply entry."""
        rid = f"{self.turn_id}:r{round_no}"
        for event in self.events:
            if event.kind == "entry" and event.data.get("entry_id") == rid:
                return "".join(
                    p.get("text", "") for p in event.data["parts"] if p["kind"] == "text"
                )
        raise AssertionError(f"no entry {rid} in {self.kinds}")

    def entries(self, role: str) -> list[dict[str, Any]]:
        return [e.data for e in self.events if e.kind == "entry" and e.data.get("role") == role]


def start(client: httpx.Client, session_id: str, text: str, **extra: Any) -> str:
    """Start a turn; its id."""
    answer = client.post(f"/sessions/{session_id}/turns", json={"text": text, **extra})
    assert answer.status_code == 202, answer.text
    turn_id: str = answer.json()["turn_id"]
    return turn_id


def follow(client: httpx.Client, session_id: str, turn_id: str) -> Followed:
    """Read the turn's event stream to its end."""
    followed = Followed(turn_id)
    with client.stream("GET", f"/sessions/{session_id}/turns/{turn_id}/stream") as answer:
        assert answer.status_code == 200, answer.read()
        for event in read_sse(answer.iter_lines()):
            followed.events.append(event)
            if event.kind in ("end", "error"):
                break
    return followed


def interrupted(
    client: httpx.Client, session_id: str, text: str, interrupt: Callable[[str], object]
) -> tuple[str, list[str]]:
    """Start a long reply (400 tokens), call `interrupt(turn_id)` once its first live delta
    arrived; (the turn id, the stream's remaining lines read to its close)."""
    turn_id = start(client, session_id, text, model_settings={"max_tokens": 400})
    with client.stream("GET", f"/sessions/{session_id}/turns/{turn_id}/stream") as stream:
        lines = stream.iter_lines()
        for line in lines:
            if line.startswith("event: delta"):
                break
        interrupt(turn_id)
        return turn_id, list(lines)


def converse(client: httpx.Client, session_id: str, text: str, **extra: Any) -> Followed:
    """One whole turn: start it and follow it to its end."""
    return follow(client, session_id, start(client, session_id, text, **extra))


def new_session(client: httpx.Client) -> str:
    answer = client.post("/sessions", json={})
    assert answer.status_code == 201, answer.text
    session_id: str = answer.json()["session_id"]
    return session_id
