"""A real `python -m turnkeep.api` on 127.0.0.1 (SQLite): `kill -9` at random moments under
load with restarts, a slow-loris client, and duplicate headers."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.reliability.conftest import FULL
from tests.support.real_server import BODY, DUPLICATES, MALFORMED, RealServer, raw_request
from tests.support.server_load import USER, kill_run, new_turn_completes

KILLS = 8 if FULL else 2
SEED = 9


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RealServer]:
    running = RealServer(tmp_path / "data")
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.timeout(600)
def test_kill_9_at_random_moments_under_load_loses_no_acknowledged_write_and_sticks_no_session(
    server: RealServer,
) -> None:
    report = kill_run(server, kills=KILLS, sessions=3, seed=SEED)

    assert report.kills == KILLS
    assert report.acked_turns > 0  # the load really started turns before the kills
    assert report.violations == []
    sid = _any_session(server.url)
    assert new_turn_completes(server.url, sid) == "completed"


def _any_session(url: str) -> str:
    listed = httpx.get(f"{url}/sessions", headers=USER, timeout=10).json()["sessions"]
    return str(listed[0]["session_id"])


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    """One server shared by the hostile-client tests (each leaves it serving others)."""
    running = RealServer(tmp_path_factory.mktemp("shared") / "data")
    running.start()
    try:
        yield running
    finally:
        running.stop()


def test_slow_loris_clients_do_not_stop_the_server_serving_others(started: RealServer) -> None:
    stop = threading.Event()
    sockets: list[socket.socket] = []

    def drip() -> None:
        # 20 connections each sending a request line and headers one byte at a time.
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", started.port), timeout=5)
            sock.sendall(b"GET /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            sockets.append(sock)
        while not stop.is_set():
            for sock in sockets:
                with contextlib.suppress(OSError):  # the server may drop a slow connection
                    sock.sendall(b"X")
            time.sleep(0.2)

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    time.sleep(0.5)
    answered = []
    try:
        with httpx.Client(base_url=started.url, headers=USER, timeout=10) as client:
            created = client.post("/sessions", json={"title": "served"})
            answered.append(created.status_code)
            for _ in range(10):
                answered.append(client.get(f"/sessions/{created.json()['session_id']}").status_code)
    finally:
        stop.set()
        dripper.join(5)
        for sock in sockets:
            sock.close()

    assert answered == [201] + [200] * 10  # every other request answered (10 s cap each)
    assert started.tracebacks() == ""


def test_an_identical_content_length_sent_twice_is_collapsed_into_one_body(
    started: RealServer,
) -> None:
    # The HTTP parser (h11) replaces identical duplicates by one value, as RFC 9110 §8.6
    # allows; the app never sees two. Conflicting values are refused (above).
    request = (
        b"POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer dev-cl\r\n"
        b"Content-Type: application/json\r\nContent-Length: 14\r\nContent-Length: 14\r\n\r\n" + BODY
    )

    status = raw_request(started.port, request)

    assert status == 201
    listed = httpx.get(f"{started.url}/sessions", headers={"Authorization": "Bearer dev-cl"})
    assert [s["meta"]["title"] for s in listed.json()["sessions"]] == ["x"]


@pytest.mark.parametrize("name", sorted(DUPLICATES))
def test_duplicate_headers_get_a_clear_4xx_never_a_5xx_or_a_success(
    started: RealServer, name: str
) -> None:
    status = raw_request(started.port, DUPLICATES[name])

    assert 400 <= status < 500, f"{name}: {status}"
    assert started.tracebacks() == ""


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_requests_get_a_4xx_or_a_closed_connection_never_a_5xx(
    started: RealServer, name: str
) -> None:
    status = raw_request(started.port, MALFORMED[name])

    assert status == 0 or 400 <= status < 500, f"{name}: {status}"
    assert started.tracebacks() == ""
    # The server still serves others afterwards.
    assert httpx.get(f"{started.url}/sessions", headers=USER, timeout=10).status_code == 200
