"""`GET /sessions/{id}/turns/{turn}/stream` against a real `python -m turnkeep.api` server on
127.0.0.1 (SQLite, the scripted model streaming one word per 20 ms): catch-up, live deltas,
resume by cursor and by `Last-Event-ID`, the route's auth and 404 rules, and the `error` event
that ends a stream which cannot go on (its session deleted, its store failed)."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.real_server import RealServer
from turnkeep.cli.sse import SseEvent, apply_delta, read_sse
from turnkeep.envelope.sqlite import SqliteEnvelopeStore

SLOW = "scripted?delay_ms=20&words_per_frame=1"
WORDS = 40


@pytest.fixture
def slow_server(tmp_path: Path) -> Iterator[str]:
    server = RealServer(tmp_path / "data", extra_env={"TURNKEEP_MODEL": SLOW})
    url = server.start()
    try:
        yield url
    finally:
        server.stop()
    assert server.tracebacks() == ""


def _client(url: str, user: str = "alice") -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer dev-{user}"}, timeout=30.0)


def _start(client: httpx.Client, text: str) -> tuple[str, str]:
    sid = client.post("/sessions", json={}).json()["session_id"]
    answer = client.post(f"/sessions/{sid}/turns", json={"text": text})
    assert answer.status_code == 202, answer.text
    return sid, answer.json()["turn_id"]


def _stream(
    client: httpx.Client, path: str, headers: dict[str, str] | None = None
) -> tuple[httpx.Response, list[SseEvent]]:
    with client.stream("GET", path, headers=headers) as answer:
        if answer.status_code != 200:
            answer.read()
            return answer, []
        events = list(read_sse(answer.iter_lines()))
    return answer, events


def _bubbles(events: list[SseEvent]) -> dict[str, str]:
    """What a client shows: frames and deltas by the offset rule, superseded by entries."""
    bubbles: dict[str, str] = {}
    for event in events:
        data: dict[str, Any] = event.data
        if event.kind in ("frame", "delta"):
            rid = data["response_id"]
            bubbles[rid] = apply_delta(bubbles.get(rid, ""), data["offset"], data["text"])
        elif event.kind == "entry" and data.get("response_id"):
            bubbles[data["response_id"]] = "".join(
                p.get("text", "") for p in data["parts"] if p.get("kind") == "text"
            )
    return bubbles


def test_a_turn_streams_live_deltas_then_its_entries_and_ends_with_its_outcome(
    slow_server: str,
) -> None:
    words = " ".join(f"w{i}" for i in range(WORDS))
    with _client(slow_server) as client:
        sid, turn = _start(client, words)
        answer, events = _stream(client, f"/sessions/{sid}/turns/{turn}/stream")
        page = client.get(f"/sessions/{sid}/turns/{turn}/events", params={"limit": 1000}).json()
        page_usage = client.get(f"/sessions/{sid}/turns/{turn}").json()["usage"]

    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    kinds = [e.kind for e in events]
    assert kinds[-1] == "end"
    assert events[-1].data == {
        "turn_id": turn,
        "status": "completed",
        "error": None,
        "error_code": None,
        "rounds": 1,
        "usage": page_usage,
        "output": None,  # a typed turn's result (docs/agent.md); this agent has none
    }
    deltas = [e for e in events if e.kind == "delta"]
    assert deltas
    assert all(e.id is None for e in deltas)
    # Batched at 100 ms: fewer pieces than the words streamed one per 20 ms.
    assert len(deltas) < WORDS
    # Every seq event once, in order, and the entries are exactly the events page's.
    ids = [e.id for e in events if e.id is not None]
    assert ids == sorted(set(ids))
    entries = [e.data for e in events if e.kind == "entry"]
    assert entries == [e for e in page["events"] if e["kind"] == "entry"]
    reply = f"You said: {words}"
    assert _bubbles(events)[f"{turn}:r0"] == reply
    # The live text alone, before the entry, shows the reply as it grew (its last piece may
    # come with the entry: deltas leave at most one per 100 ms).
    live = _bubbles([e for e in events if e.kind in ("frame", "delta")])
    assert len(live[f"{turn}:r0"]) > len(reply) // 2
    assert reply.startswith(live[f"{turn}:r0"])
    # The status first, and each change of it; the end last.
    statuses = [e.data for e in events if e.kind == "status"]
    assert statuses == [
        {"turn_id": turn, "status": "running"},
        {"turn_id": turn, "status": "completed"},
    ]
    assert kinds[0] == "status"


def test_a_stream_resumes_after_a_cursor_or_last_event_id_with_only_later_events(
    slow_server: str,
) -> None:
    with _client(slow_server) as client:
        sid, turn = _start(client, "hello there")
        _, whole = _stream(client, f"/sessions/{sid}/turns/{turn}/stream")
        first = next(e.id for e in whole if e.id is not None)
        _, by_cursor = _stream(client, f"/sessions/{sid}/turns/{turn}/stream?cursor={first}")
        _, by_header = _stream(
            client, f"/sessions/{sid}/turns/{turn}/stream", {"Last-Event-ID": str(first)}
        )

    later = [e.data for e in whole if e.kind == "entry" and e.id is not None and e.id > first]
    assert later
    for resumed in (by_cursor, by_header):
        assert [e.data for e in resumed if e.kind == "entry"] == later
        assert resumed[-1].kind == "end"
        assert resumed[-1].data["status"] == "completed"


def test_the_stream_answers_like_every_route_for_strangers_missing_turns_and_bad_ids(
    slow_server: str,
) -> None:
    with _client(slow_server) as alice, _client(slow_server, "bob") as bob:
        sid, turn = _start(alice, "hi")
        path = f"/sessions/{sid}/turns/{turn}/stream"
        strangers, _ = _stream(bob, path)
        missing, _ = _stream(alice, f"/sessions/{sid}/turns/op-{'0' * 32}/stream")
        bad_id, _ = _stream(alice, path, {"Last-Event-ID": "soon"})
        anonymous = httpx.get(f"{slow_server}{path}", timeout=30.0)

    assert strangers.status_code == 404
    assert strangers.json()["error"] == {"code": "not_found", "message": "session not found"}
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert bad_id.status_code == 422
    assert bad_id.json()["error"]["field"] == "Last-Event-ID"
    assert anonymous.status_code == 401


def test_the_remote_chat_follows_a_turn_on_its_stream_without_polling_the_events_page(
    slow_server: str,
) -> None:
    from turnkeep.cli.printer import StreamPrinter
    from turnkeep.cli.remote import RemoteChat, open_client

    paths: list[str] = []
    out = io.StringIO()
    client = open_client(slow_server, token=None, user="alice")
    client.event_hooks["request"] = [lambda request: paths.append(request.url.path)]
    with client:
        chat = RemoteChat(client, StreamPrinter(out))
        chat.open_session(None)
        status = chat.turn("stream this reply to me")

    assert status == "completed"
    assert "You said: stream this reply to me" in out.getvalue()
    assert out.getvalue().count("stream this reply") == 1
    assert [p for p in paths if p.endswith("/events")] == []
    assert len([p for p in paths if p.endswith("/stream")]) == 1
    assert chat.streams is True


def test_a_turn_waiting_for_an_approval_keeps_its_stream_open_and_says_so_then_ends(
    slow_server: str,
) -> None:
    with _client(slow_server) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        assert client.put(f"/sessions/{sid}/meta", json={"toolApproval": "echo"}).is_success
        turn = client.post(
            f"/sessions/{sid}/turns", json={"text": 'call echo {"text": "ship it"}'}
        ).json()["turn_id"]
        events: list[SseEvent] = []
        with client.stream("GET", f"/sessions/{sid}/turns/{turn}/stream") as answer:
            lines = answer.iter_lines()
            for event in read_sse(lines):
                events.append(event)
                if event.kind == "status" and event.data["status"] == "awaiting_approval":
                    [pending] = client.get("/approvals").json()["approvals"]
                    decided = client.post(
                        f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
                        json={"decision": "approve"},
                    )
                    assert decided.status_code == 202
            # The server closed the stream after `end`.

    statuses = [e.data["status"] for e in events if e.kind == "status"]
    # Waiting already, or soon: said either way, and the stream stayed open through it.
    assert "awaiting_approval" in statuses
    assert statuses[-1] == "completed"
    kinds = [e.kind for e in events]
    assert "approval_requested" in kinds
    assert "approval_decided" in kinds
    assert kinds[-1] == "end"
    reply = _bubbles(events)[f"{turn}:r1"]
    assert reply == "Tool echo returned: ship it"


@pytest.fixture
def watched_server(tmp_path: Path) -> Iterator[RealServer]:
    """A server whose streams re-read storage every 100 ms without a commit notice, so a
    change made behind its back (another host on the same file) is seen at once."""
    server = RealServer(
        tmp_path / "data",
        extra_env={"TURNKEEP_MODEL": SLOW, "TURNKEEP_STREAM_POLL_SECONDS": "0.1"},
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _stream_past_a_wait(server: RealServer, change: Callable[[str], None]) -> list[SseEvent]:
    """Stream a turn waiting for an approval; once it says so, `change(session_id)` the
    server's SQLite file behind its back; the events until the server closes the stream."""
    with _client(server.url) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        assert client.put(f"/sessions/{sid}/meta", json={"toolApproval": "echo"}).is_success
        turn = client.post(
            f"/sessions/{sid}/turns", json={"text": 'call echo {"text": "ship it"}'}
        ).json()["turn_id"]
        events: list[SseEvent] = []
        with client.stream("GET", f"/sessions/{sid}/turns/{turn}/stream") as answer:
            assert answer.status_code == 200
            for event in read_sse(answer.iter_lines()):
                events.append(event)
                if event.kind == "status" and event.data["status"] == "awaiting_approval":
                    change(sid)
    return events


def test_a_stream_whose_session_is_deleted_meanwhile_ends_with_a_not_found_error_event(
    watched_server: RealServer,
) -> None:
    db = watched_server.data_dir / "turnkeep.db"

    def delete(session_id: str) -> None:
        store = SqliteEnvelopeStore(str(db))
        try:
            store.delete(session_id)
        finally:
            store.close()

    events = _stream_past_a_wait(watched_server, delete)
    assert [e.kind for e in events][-1] == "error"
    assert events[-1].data == {"code": "not_found", "message": "session not found"}
    assert "end" not in [e.kind for e in events]
    assert watched_server.tracebacks() == ""


def test_a_stream_whose_store_fails_ends_with_an_unavailable_error_event_and_a_logged_cause(
    watched_server: RealServer,
) -> None:
    db = watched_server.data_dir / "turnkeep.db"

    def break_store(session_id: str) -> None:
        with sqlite3.connect(db) as connection:
            connection.execute("DROP TABLE entries")

    events = _stream_past_a_wait(watched_server, break_store)
    assert [e.kind for e in events][-1] == "error"
    assert events[-1].data == {
        "code": "unavailable",
        "message": "the stream failed; resume with the last id",
    }
    assert "end" not in [e.kind for e in events]
    watched_server.stop()
    assert "the stream of turn" in watched_server.tracebacks()
