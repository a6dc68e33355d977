"""Reliability report: crash points tried/survived per backend, duplicate deliveries, host-meta
vs notes races with lost writes, hostile inputs by outcome class, a real server killed with
SIGKILL under load, and stuck sessions.

Every figure is counted by running the real code (the same helpers as `tests/reliability/`):
- crash points: a crash after each storage call of a turn with two parallel tool calls and a
  notes write (SQLite transaction, JSONL write, AWS request under moto), recovered as the
  deployment recovers, then every invariant of `tests.support.reliability.check_turn`;
- duplicate deliveries: the turn's steps each delivered twice;
- races: a host PUT and a working-notes update on one envelope behind a barrier;
- hostile inputs: `tests/unit/test_api_bad_input.py`'s cases, every route as another user, and
  duplicate singleton headers, against the app (TestClient);
- kill -9: `python -m turnkeep.api` on 127.0.0.1 killed at seeded random moments under load.

`--smoke` runs a sample of each (about a minute on 2 busy cores); the full run takes longer.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.reliability import (
    AwsDeployment,
    Deployment,
    LocalDeployment,
    check_turn,
    crash_matrix,
    run_steps,
)


def _stuck(problems: list[str]) -> int:
    return sum("stuck" in p or "turnStatus='running'" in p for p in problems)


def crash_section(backends: list[str], every: dict[str, int], root: Path) -> dict[str, int]:
    """Crash points and duplicate deliveries per backend; returns the stuck-session count."""
    stuck = 0
    print("crash points (a crash after one storage call, then recovery; all invariants checked)")
    print(f"  {'backend':<8} {'tried':>6} {'survived':>9} {'sampled':>8} {'seconds':>8}")
    duplicates: list[tuple[str, int, int]] = []
    for backend in backends:
        started = time.monotonic()
        if backend == "aws":
            from moto import mock_aws

            with mock_aws():
                deployment: Deployment = AwsDeployment.create()
                results = crash_matrix(deployment, every=every[backend])
                duplicates.append(_duplicates(deployment))
        else:
            deployment = LocalDeployment(backend, Path(tempfile.mkdtemp(dir=root)))
            results = crash_matrix(deployment, every=every[backend])
            duplicates.append(_duplicates(deployment))
        survived = sum(not r.problems for r in results)
        stuck += sum(_stuck(r.problems) for r in results)
        sample = "all" if every[backend] == 1 else f"1/{every[backend]}"
        ended = Counter(r.status for r in results)
        print(
            f"  {backend:<8} {len(results):>6} {survived:>9} {sample:>8} "
            f"{time.monotonic() - started:>8.1f}   turns then: "
            + ", ".join(f"{k} {v}" for k, v in sorted(ended.items()))
        )
        for r in results:
            if r.problems:
                print(f"    FAILED {r.point} ({r.crash}): {r.problems[0]}")
    print("duplicate deliveries (every step of the turn delivered twice)")
    for backend, delivered, survived in duplicates:
        print(f"  {backend:<8} steps delivered twice: {delivered}, turns intact: {survived}/1")
    return {"stuck": stuck}


def _duplicates(deployment: Deployment) -> tuple[str, int, int]:
    run = run_steps(deployment, None, deliveries=2)
    return deployment.name, len(run.invocations), int(check_turn(deployment, run) == [])


def race_section(iterations: int, root: Path) -> None:
    """Host PUT vs notes update behind a barrier: lost writes per envelope backend."""
    from turnkeep.envelope.memory import MemoryEnvelopeStore, memory_envelope_state
    from turnkeep.envelope.sqlite import SqliteEnvelopeStore
    from turnkeep.notes import UPDATE_TOOL, working_notes_tools
    from turnkeep.tools.base import ToolContext

    ctx = ToolContext(session_id="s1", user_id="alice", operation_id="op", call_id="c")
    print("races (host PUT racing a working-notes update on one envelope)")
    backends: dict[str, Any] = {
        "memory": lambda: MemoryEnvelopeStore(memory_envelope_state("race")),
        "sqlite": lambda: SqliteEnvelopeStore(str(root / "race.db")),
    }
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave mid-call, not only at I/O
    try:
        for name, opener in backends.items():
            host, tools, reader = opener(), opener(), opener()
            reader.create("s1", "alice", {"title": "t-start"})
            update = next(
                t for t in working_notes_tools(tools, "alice", "s1") if t.name == UPDATE_TOOL
            )
            lost = sum(_race_once(host, update, ctx, reader, i) for i in range(iterations))
            print(f"  {name:<8} iterations: {iterations}, lost writes: {lost}")
            for store in (host, tools, reader):
                store.close()
    finally:
        sys.setswitchinterval(previous)


def _race_once(host: Any, update: Any, ctx: Any, reader: Any, i: int) -> int:
    """One host PUT vs one notes update behind a barrier; how many acknowledged writes got lost."""
    from turnkeep.notes.tools import UpdateArgs

    barrier = threading.Barrier(2)
    notes_result: list[Any] = []

    def put() -> None:
        barrier.wait()
        host.put_host_meta("s1", "alice", {"title": f"t{i}"})

    def note() -> None:
        barrier.wait()
        notes_result.append(update.run(UpdateArgs(notes=f"finding {i}"), ctx))

    threads = [threading.Thread(target=f) for f in (put, note)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = reader.get("s1")
    meta = got.meta if got is not None else {}
    saved = bool(notes_result) and not notes_result[0].is_error
    return int(meta.get("title") != f"t{i}") + int(
        saved and meta.get("workingNotes") != f"finding {i}"
    )


def hostile_section() -> None:
    """Bad input, cross-tenant requests and duplicate headers: answers by status class."""
    from tests.support.api_client import OTHER, auth, make_api_harness
    from tests.unit import test_api_bad_input as bad

    classes: Counter[str] = Counter()
    unexpected: list[str] = []
    for harness in make_api_harness():
        harness.session(bad.SID)
        harness.client.put(f"/sessions/{bad.SID}/meta", json={"title": "keep"}, headers=auth())
        turn = harness.start(bad.SID, "remember we chose SQLite")
        harness.session(user=OTHER)
        requests: list[tuple[str, str, str, dict[str, Any], int | None]] = []
        for param in bad.CASES:
            case = param.values[0]
            headers = auth() if case.headers is None else dict(case.headers)
            if case.content is not None:
                headers["Content-Type"] = "application/json"
            kwargs = {"json": case.json, "content": case.content, "params": case.params}
            requests.append(
                (
                    case.name,
                    case.method,
                    case.path.format(turn=turn),
                    kwargs | {"headers": headers},
                    case.status,
                )
            )
        for method, path, body in bad.OTHER_USER_ROUTES:
            requests.append(
                (
                    f"other-user {method} {path}",
                    method,
                    path.format(turn=turn),
                    {"json": body, "headers": auth(OTHER)},
                    404,
                )
            )
        for header in ("authorization", "content-type"):
            requests.append(
                (
                    f"duplicate {header}",
                    "POST",
                    "/sessions",
                    {
                        "json": {"title": "x"},
                        "headers": [
                            ("authorization", "Bearer dev-alice"),
                            (header, "a"),
                            (header, "b"),
                        ]
                        if header != "authorization"
                        else [(header, "Bearer dev-a"), (header, "Bearer dev-b")],
                    },
                    400,
                )
            )
        for name, method, path, kwargs, expected in requests:
            status = harness.client.request(method, path, **kwargs).status_code
            classes[f"{status // 100}xx"] += 1
            if expected is not None and status != expected:
                unexpected.append(f"{name}: {status} (expected {expected})")
    total = sum(classes.values())
    print(
        f"hostile inputs (app): {total} requests — "
        + ", ".join(f"{k}: {classes.get(k, 0)}" for k in ("2xx", "3xx", "4xx", "5xx"))
    )
    for line in unexpected:
        print(f"    UNEXPECTED {line}")


def raw_hostile(server: Any) -> None:
    """Duplicate headers and malformed HTTP against the real server: answers by class."""
    from tests.support.real_server import DUPLICATES, MALFORMED, raw_request

    classes: Counter[str] = Counter()
    for request in [*DUPLICATES.values(), *MALFORMED.values()]:
        status = raw_request(server.port, request)
        classes["closed" if status == 0 else f"{status // 100}xx"] += 1
    print(
        f"hostile inputs (real server, raw HTTP): {sum(classes.values())} requests — "
        + ", ".join(f"{k}: {classes.get(k, 0)}" for k in ("2xx", "4xx", "5xx", "closed"))
    )


def kill_section(kills: int, root: Path) -> int:
    """A real local server killed with SIGKILL under load; returns the stuck-session count."""
    from tests.support.real_server import RealServer
    from tests.support.server_load import kill_run

    server = RealServer(root / "server-data")
    started = time.monotonic()
    try:
        report = kill_run(server, kills=kills, sessions=3, seed=9)
        raw_hostile(server)
    finally:
        server.stop()
    print(
        f"kill -9 under load (real server, SQLite): kills: {report.kills}, turns acknowledged: "
        f"{report.acked_turns}, acknowledged writes lost or sessions stuck: "
        f"{len(report.violations)} ({time.monotonic() - started:.1f} s)"
    )
    for violation in report.violations:
        print(f"    VIOLATION {violation}")
    return sum("stuck" in v for v in report.violations)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a small sample (CI)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.smoke:
            every = {"sqlite": 3, "jsonl": 6, "aws": 40}
            stuck = crash_section(["sqlite", "jsonl", "aws"], every, root)["stuck"]
            race_section(50, root)
            hostile_section()
            stuck += kill_section(1, root)
        else:
            every = {"sqlite": 1, "jsonl": 1, "aws": 1}
            stuck = crash_section(["sqlite", "jsonl", "aws"], every, root)["stuck"]
            race_section(1000, root)
            hostile_section()
            stuck += kill_section(10, root)
    print(f"stuck sessions: {stuck}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
