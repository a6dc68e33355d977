"""Load on a real local server killed with SIGKILL at random moments, and what must survive.

A `Ledger` records what the server acknowledged (sessions created, host-meta PUTs, turn starts)
and what was attempted; after each restart `Ledger.violations` lists every acknowledged write
that was lost, every turn that never ends and every session left stuck.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.support.real_server import RealServer

USER = {"Authorization": "Bearer dev-reliability"}
TURN_TEXT = 'call calculator {"expression": "6*7"}\ncall echo {"text": "x"}\nthen\nremember k'
ENDED = ("completed", "failed", "aborted")
SETTLE_TIMEOUT_S = 60.0


@dataclass
class Ledger:
    """Acknowledged and attempted writes, per session."""

    sessions: list[str] = field(default_factory=list)
    meta_acked: dict[str, int] = field(default_factory=dict)
    meta_sent: dict[str, int] = field(default_factory=dict)
    turns: dict[str, list[str]] = field(default_factory=dict)
    completed: set[tuple[str, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def violations(self, client: httpx.Client) -> list[str]:
        """After a restart: lost acknowledged writes, turns that never end, stuck sessions."""
        problems: list[str] = []
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        for sid in self.sessions:
            view = client.get(f"/sessions/{sid}")
            if view.status_code != 200:
                problems.append(f"session {sid} lost: {view.status_code}")
                continue
            title = view.json()["meta"].get("title")
            stored = int(title[1:]) if isinstance(title, str) and title.startswith("v") else 0
            acked, sent = self.meta_acked.get(sid, 0), self.meta_sent.get(sid, 0)
            if not acked <= stored <= sent:
                problems.append(f"session {sid}: title v{stored}, acknowledged v{acked}")
            for turn in self.turns.get(sid, []):
                status = _settled_status(client, sid, turn, deadline)
                if status not in ENDED:
                    problems.append(f"turn {turn} of {sid} stuck at {status!r}")
                elif (sid, turn) in self.completed and status != "completed":
                    problems.append(f"turn {turn} of {sid} was completed, now {status!r}")
            summary = client.get(f"/sessions/{sid}").json().get("turn") or {}
            if summary.get("status") in ("running", "cancelling"):
                problems.append(f"session {sid} stuck: envelope turn {summary}")
        return problems


def _settled_status(client: httpx.Client, sid: str, turn: str, deadline: float) -> str:
    while True:
        got = client.get(f"/sessions/{sid}/turns/{turn}")
        status = str(got.json().get("status")) if got.status_code == 200 else str(got.status_code)
        if status in ENDED or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def _worker(url: str, sid: str, ledger: Ledger, stop: threading.Event, seed: int) -> None:
    """Meta PUTs and turn starts on one session until the server dies or `stop` is set."""
    rng = random.Random(seed)
    try:
        with httpx.Client(base_url=url, headers=USER, timeout=10) as client:
            while not stop.is_set():
                with ledger.lock:
                    n = ledger.meta_sent.get(sid, 0) + 1
                    ledger.meta_sent[sid] = n
                if client.put(f"/sessions/{sid}/meta", json={"title": f"v{n}"}).status_code == 200:
                    with ledger.lock:
                        ledger.meta_acked[sid] = max(ledger.meta_acked.get(sid, 0), n)
                if rng.random() < 0.5:
                    started = client.post(f"/sessions/{sid}/turns", json={"text": TURN_TEXT})
                    if started.status_code == 202:
                        with ledger.lock:
                            ledger.turns.setdefault(sid, []).append(started.json()["turn_id"])
                for turn in list(ledger.turns.get(sid, []))[-1:]:
                    got = client.get(f"/sessions/{sid}/turns/{turn}")
                    if got.status_code == 200 and got.json().get("status") == "completed":
                        with ledger.lock:
                            ledger.completed.add((sid, turn))
    except httpx.TransportError:
        return  # the server died under us


@dataclass
class KillReport:
    """What a kill run did and found."""

    kills: int = 0
    violations: list[str] = field(default_factory=list)
    acked_turns: int = 0
    acked_meta: int = 0
    server_errors: int = 0


def kill_run(server: RealServer, *, kills: int, sessions: int, seed: int) -> KillReport:
    """`kills` cycles of: (re)start, check, load, SIGKILL at a seeded random moment; then a
    final restart and check. The server is left running (the caller stops it)."""
    rng = random.Random(seed)
    ledger = Ledger()
    report = KillReport()
    url = server.start()
    with httpx.Client(base_url=url, headers=USER, timeout=10) as client:
        for _ in range(sessions):
            created = client.post("/sessions", json={"title": "v0"})
            assert created.status_code == 201, created.text
            ledger.sessions.append(created.json()["session_id"])
    for cycle in range(kills):
        stop = threading.Event()
        threads = [
            threading.Thread(target=_worker, args=(url, sid, ledger, stop, seed + cycle * 97 + i))
            for i, sid in enumerate(ledger.sessions)
        ]
        for thread in threads:
            thread.start()
        if cycle == 0:
            # On a loaded machine the first turn start can take longer than the random delay:
            # the first kill waits for one acknowledged turn, so the run always kills under real
            # load; later kills keep landing anywhere, before any write of their cycle too.
            _wait_for_a_turn(ledger, timeout=SETTLE_TIMEOUT_S)
        time.sleep(rng.uniform(0.2, 1.5))
        server.kill9()
        report.kills += 1
        stop.set()
        for thread in threads:
            thread.join(30)
        url = server.start()
        with httpx.Client(base_url=url, headers=USER, timeout=10) as client:
            report.violations += [f"after kill {cycle + 1}: {v}" for v in ledger.violations(client)]
    report.acked_turns = sum(len(t) for t in ledger.turns.values())
    report.acked_meta = sum(ledger.meta_acked.values())
    return report


def _wait_for_a_turn(ledger: Ledger, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with ledger.lock:
            if any(ledger.turns.values()):
                return
        time.sleep(0.02)


def new_turn_completes(url: str, sid: str) -> Any:
    """Start one more turn on `sid` and wait for its end; its final status.

    A 429 is the session's start rate limit (the load may have used its window), not a stuck
    session: the start is retried after its `Retry-After`, within the settle timeout. Any other
    refusal (409 a turn still running) is returned as the status code.
    """
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    with httpx.Client(base_url=url, headers=USER, timeout=10) as client:
        started = client.post(f"/sessions/{sid}/turns", json={"text": "hello"})
        while started.status_code == 429 and time.monotonic() < deadline:
            time.sleep(min(float(started.headers.get("retry-after", "1")), SETTLE_TIMEOUT_S))
            started = client.post(f"/sessions/{sid}/turns", json={"text": "hello"})
        if started.status_code != 202:
            return started.status_code
        return _settled_status(
            client, sid, started.json()["turn_id"], time.monotonic() + SETTLE_TIMEOUT_S
        )
