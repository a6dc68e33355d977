"""Turns waiting for approval on the local orchestrator: threads held and decision latency.

Starts N turns (scripted model, SQLite in a temp dir) whose one tool call needs approval,
through the `LocalLauncher` (4 worker threads), waits until all of them wait, then prints the
process's thread count before the turns, while N turns wait, and after; then approves every
call and prints the median and worst time from the decision (`decide` + the launch the API
does) to the turn's completion. A waiting turn holds no thread: the count while waiting stays
that of the pool plus the one timer thread, whatever N. `--smoke` runs 5 turns (CI).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from turnkeep.api.launch import LocalLauncher
from turnkeep.harness import StartTurnInput, new_op_id, start_turn, turn_result
from turnkeep.harness.approvals import awaiting_calls, decide
from turnkeep.harness.state import load_state
from turnkeep.runtime.build import Runtime, build_runtime
from turnkeep.runtime.settings import TurnkeepSettings


def _waiting_call(runtime: Runtime, session_id: str, op_id: str) -> str | None:
    storage = runtime.deps.open_storage(session_id)
    try:
        state = load_state(storage, op_id)
        calls = awaiting_calls(storage, state) if state is not None else []
    finally:
        storage.close()
    return calls[0].call_id if calls else None


def _until(check: Callable[[], bool], what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)


def run(turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = build_runtime(TurnkeepSettings(local_dir=Path(tmp), frame_interval_ms=0))
        launcher = LocalLauncher(runtime.deps, workers=4, max_pending=max(64, turns))
        try:
            before = threading.active_count()
            ops: list[tuple[str, str]] = []
            for i in range(turns):
                sid = f"b{i}"
                runtime.envelopes.create(sid, "u1", {"toolApproval": "echo"})
                op = new_op_id()
                start_turn(
                    runtime.deps,
                    StartTurnInput(
                        session_id=sid, op_id=op, user_id="u1", text='call echo {"text": "x"}'
                    ),
                )
                launcher.launch(sid, op)
                ops.append((sid, op))
            _until(lambda: launcher.pending() == 0, "every turn to pause")
            calls = {key: _waiting_call(runtime, *key) for key in ops}
            assert all(calls.values()), "a turn did not wait for its approval"
            waiting = threading.active_count()
            latencies: list[float] = []
            for sid, op in ops:
                call_id = calls[(sid, op)]
                assert call_id is not None
                began = time.perf_counter()
                decide(runtime.deps, sid, op, call_id, user_id="u1", decision="approve")
                launcher.launch(sid, op)

                def done(s: str = sid, o: str = op) -> bool:
                    result = turn_result(runtime.deps, s, o)
                    return result is not None and result.status == "completed"

                _until(done, "the approved turn to complete")
                latencies.append(time.perf_counter() - began)
            after = threading.active_count()
        finally:
            launcher.shutdown()
            runtime.close()
    print(f"approvals on the local orchestrator ({turns} turns, 4 worker threads)")
    print(f"  threads before the turns          : {before}")
    print(f"  threads while {turns:>4} turns wait    : {waiting}")
    print(f"  threads after every turn completed: {after}")
    print(
        f"  decision -> completed (SQLite)    : median {statistics.median(latencies) * 1000:.1f}"
        f" ms, worst {max(latencies) * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200, help="turns waiting at once")
    parser.add_argument("--smoke", action="store_true", help="5 turns only (CI)")
    args = parser.parse_args()
    run(5 if args.smoke else args.turns)


if __name__ == "__main__":
    main()
