"""The real local server runs tool calls in killable worker processes: a hung user tool is
stopped at `TURNKEEP_TOOL_TIMEOUT_SECONDS` with a tool error, and other sessions keep being
served meanwhile (their latency is measured by bench/tool_isolation_bench.py, not here)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.real_server import RealServer, repo_pythonpath

ALICE = {"Authorization": "Bearer dev-alice"}
BOB = {"Authorization": "Bearer dev-bob"}
SERVE = (
    "import sys\n"
    "from tests.support.slow_tools import HANG\n"
    "from turnkeep.api.__main__ import main\n"
    "raise SystemExit(main(sys.argv[1:],"
    " extra_tools=lambda _s, _u: [HANG]))\n"
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    real = RealServer(
        tmp_path / "data",
        extra_env={
            "TURNKEEP_TOOL_TIMEOUT_SECONDS": "1",
            "TURNKEEP_TOOL_WORKERS": "1",
            "PYTHONPATH": repo_pythonpath(),
        },
        command=[sys.executable, "-c", SERVE],
    )
    url = real.start()
    try:
        yield url
    finally:
        real.stop()


def _wait(client: httpx.Client, sid: str, turn: str, headers: dict[str, str]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        view = client.get(f"/sessions/{sid}/turns/{turn}", headers=headers).json()
        if view["finished"]:
            return str(view["status"])
        time.sleep(0.05)
    raise AssertionError("the turn did not end")


def test_a_hung_tool_on_the_real_server_ends_with_a_tool_error_while_others_are_served(
    server: str,
) -> None:
    with httpx.Client(base_url=server, timeout=30) as client:
        a_sid = client.post("/sessions", json={}, headers=ALICE).json()["session_id"]
        b_sid = client.post("/sessions", json={}, headers=BOB).json()["session_id"]
        started = client.post(
            f"/sessions/{a_sid}/turns", json={"text": 'call hang {"seconds": 600}'}, headers=ALICE
        )
        assert started.status_code == 202, started.text
        served: list[int] = []
        stop = threading.Event()

        def bob_reads() -> None:
            while not stop.is_set():
                served.append(client.get(f"/sessions/{b_sid}", headers=BOB).status_code)
                time.sleep(0.05)

        reader = threading.Thread(target=bob_reads)
        reader.start()
        try:
            status = _wait(client, a_sid, started.json()["turn_id"], ALICE)
        finally:
            stop.set()
            reader.join()
        transcript = client.get(f"/sessions/{a_sid}/transcript", headers=ALICE).text
        again = client.post(
            f"/sessions/{a_sid}/turns", json={"text": 'call hang {"seconds": 0}'}, headers=ALICE
        )
        second = _wait(client, a_sid, again.json()["turn_id"], ALICE)

    assert status == "completed"
    assert "tool hang did not finish within its limit of 1 s" in transcript
    assert served
    assert set(served) == {200}
    assert second == "completed"  # answered by the replaced worker
