"""Other users' request latency while one user's tool burns CPU, on the real local server.

Starts `python -m turnkeep.api`'s `main` on 127.0.0.1 (SQLite in a temp dir) with one extra
tool, `bigint`, whose big-integer arithmetic holds the GIL of the process running it (the
stall of issue #9: threads cannot share a process with it). Then:

1. baseline: bob's `GET /sessions/{id}` latencies with nothing else running;
2. while alice's turn runs `bigint` for a few seconds (it finishes within the tool limit):
   bob's latencies again — median and worst, against the 0.5 s target;
3. a `bigint` call past the per-call limit: the time until alice's turn ends with the tool
   error, and a follow-up tool call answered by the replaced worker;
4. the calculator refusing `(((9**64)**64)**64)**64` (timed in-process: microseconds).

The full run repeats 1-2 with `bigint` declared in-process (the server before this change)
for comparison. `--smoke` is short and isolated only (CI). Prints figures; asserts nothing
about speed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from turnkeep.tools.base import Tool, ToolContext, ToolResult

TARGET_WORST_S = 0.5
HERE = Path(__file__).resolve().parent


class BigIntArgs(BaseModel):
    seconds: float = 2.0


def _bigint(args: BigIntArgs, _ctx: ToolContext) -> ToolResult:
    # Each `**` is one C call that holds the GIL until it returns (~0.2-0.5 s here).
    end = time.monotonic() + args.seconds
    rounds = 0
    while time.monotonic() < end:
        _ = 7 ** (3_000_000 + rounds)
        rounds += 1
    return ToolResult(f"{rounds} big powers")


def extra_tools(_session_id: str, _user_id: str) -> list[Tool[Any]]:
    """The bench's CPU-bound tool (module level, so worker processes can unpickle it)."""
    # TOOL_BENCH_ISOLATION=in_process shows what the server did before tools ran in workers.
    isolation = os.environ.get("TOOL_BENCH_ISOLATION", "process")
    return [
        Tool(
            "bigint",
            "Big-integer arithmetic for `seconds`.",
            BigIntArgs,
            _bigint,
            isolation="in_process" if isolation == "in_process" else "process",
        )
    ]


def serve() -> None:
    """The server process: the real local API plus the `bigint` tool."""
    from turnkeep.api.__main__ import main

    raise SystemExit(main(["--port", "0", "--log-level", "warning"], extra_tools=extra_tools))


def _start_server(
    local_dir: str, timeout_s: float, isolation: str
) -> tuple[subprocess.Popen[str], str]:
    env = {
        **os.environ,
        "TOOL_BENCH_ISOLATION": isolation,
        "TURNKEEP_LOCAL_DIR": local_dir,
        "TURNKEEP_MODEL": "scripted",
        "TURNKEEP_TOOL_TIMEOUT_SECONDS": str(timeout_s),
        "TURNKEEP_TOOL_WORKERS": "2",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", "import tool_isolation_bench as b; b.serve()"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    if not first.startswith("turnkeep api listening on "):
        process.kill()
        raise RuntimeError(f"the server did not start: {first!r}")
    return process, first.rsplit(" ", 1)[-1]


def _latencies(
    client: Any, path: str, headers: dict[str, str], stop: threading.Event
) -> list[float]:
    seen: list[float] = []
    while not stop.is_set():
        started = time.perf_counter()
        response = client.get(path, headers=headers)
        seen.append(time.perf_counter() - started)
        response.raise_for_status()
        time.sleep(0.02)
    return seen


def _turn(client: Any, sid: str, text: str, headers: dict[str, str]) -> tuple[str, float]:
    """Start a turn and wait for its end; (status, seconds)."""
    started = time.perf_counter()
    response = client.post(f"/sessions/{sid}/turns", json={"text": text}, headers=headers)
    response.raise_for_status()
    turn = response.json()["turn_id"]
    while True:
        view = client.get(f"/sessions/{sid}/turns/{turn}", headers=headers).json()
        if view["finished"]:
            return view["status"], time.perf_counter() - started
        time.sleep(0.05)


def _events_text(client: Any, sid: str, headers: dict[str, str]) -> str:
    page = client.get(f"/sessions/{sid}/transcript", params={"limit": 1000}, headers=headers)
    return page.text


def _fmt(values: list[float]) -> str:
    return (
        f"n={len(values):4d}  median {statistics.median(values) * 1000:7.1f} ms  "
        f"worst {max(values) * 1000:7.1f} ms"
    )


def _calculator_refusal_us(repeats: int) -> float:
    from turnkeep.tools.builtin import CALCULATOR

    args = CALCULATOR.args_model(expression="(((9**64)**64)**64)**64")
    ctx = ToolContext("s", "u", "op", "c")
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = CALCULATOR.handler(args, ctx)
        times.append(time.perf_counter() - started)
        assert result.is_error
    return statistics.median(times) * 1e6


def run(smoke: bool, isolation: str) -> None:
    import httpx

    spin_s = 1.5 if smoke else 5.0
    limit_s = 3.0 if smoke else 8.0
    with tempfile.TemporaryDirectory() as local_dir:
        process, url = _start_server(local_dir, limit_s, isolation)
        try:
            with httpx.Client(base_url=url, timeout=60) as client:
                alice = {"Authorization": "Bearer dev-alice"}
                bob = {"Authorization": "Bearer dev-bob"}
                a_sid = client.post("/sessions", json={}, headers=alice).json()["session_id"]
                b_sid = client.post("/sessions", json={}, headers=bob).json()["session_id"]
                _turn(client, a_sid, 'call bigint {"seconds": 0.1}', alice)  # warm the workers

                stop = threading.Event()
                timer = threading.Timer(1.0 if smoke else 3.0, stop.set)
                timer.start()
                baseline = _latencies(client, f"/sessions/{b_sid}", bob, stop)

                loaded: list[float] = []
                stop = threading.Event()
                watcher = threading.Thread(
                    target=lambda: loaded.extend(
                        _latencies(client, f"/sessions/{b_sid}", bob, stop)
                    )
                )
                watcher.start()
                status, took = _turn(client, a_sid, f'call bigint {{"seconds": {spin_s}}}', alice)
                stop.set()
                watcher.join()

                if isolation == "process":
                    over_status, over_took = _turn(
                        client, a_sid, f'call bigint {{"seconds": {limit_s * 4}}}', alice
                    )
                    text = _events_text(client, a_sid, alice)
                    stopped = "did not finish within its limit" in text
                    after_status, _ = _turn(client, a_sid, 'call bigint {"seconds": 0.05}', alice)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()

    worst = max(loaded)
    print(f"tool isolation on the local server ({'smoke' if smoke else 'full'}): tools {isolation}")
    print(f"  bob GET /sessions/{{id}}, idle server        : {_fmt(baseline)}")
    print(f"  bob GET while alice's bigint runs {spin_s:.1f} s   : {_fmt(loaded)}")
    verdict = "met" if worst <= TARGET_WORST_S else "MISSED"
    print(f"  worst {worst * 1000:.1f} ms vs target {TARGET_WORST_S * 1000:.0f} ms: {verdict}")
    print(f"  alice's turn with the CPU-bound tool        : {status} in {took:.2f} s")
    if isolation == "process":
        print(
            f"  bigint past its {limit_s:g} s limit             : turn {over_status} in "
            f"{over_took:.2f} s, tool error {'seen' if stopped else 'MISSING'}; "
            f"next call on the replaced worker: {after_status}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a short run (CI)")
    smoke = parser.parse_args().smoke
    run(smoke, "process")
    if not smoke:  # the same load with the tool in the server's own process, for comparison
        run(smoke, "in_process")
    print(
        "calculator refuses (((9**64)**64)**64)**64  : "
        f"median {_calculator_refusal_us(200 if smoke else 2000):.1f} us"
    )


if __name__ == "__main__":
    main()
