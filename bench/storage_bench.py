"""Storage throughput and reopen time per backend (issue #2 targets; prints a table).

For memory, jsonl and sqlite (each imported lazily; "not available" if its module is missing):
- commits/s of single scoped appends (one `append_list` to an ephemeral scope per commit);
- commits/s of 10-write session transactions (values, list appends, an entry, a usage row);
- reopen time of a session holding N committed records across 100 scopes, half of them retired
  (open + first read of stats and of a live list).
- entries (issue #15): seconds to insert N entries one per commit (each naming the previous as
  parent), and seconds to reopen that session and `scan_entries` all of them.
Figures are medians of several runs. Targets: sqlite and jsonl >= 5,000 scoped append
commits/s and reopen of 100,000 records < 2 s; jsonl reopen + scan of 100,000 entries <= 1 s
and their inserts <= 2x sqlite's time.

    .venv/bin/python bench/storage_bench.py            # full sizes (about a minute)
    .venv/bin/python bench/storage_bench.py --smoke    # tiny sizes, a few seconds (CI)
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from turnkeep.storage import (
    UsageRow,
    Write,
    append_list,
    ephemeral_scope,
    insert_entry,
    insert_usage,
    open_storage,
    retire_scope,
    set_value,
    value,
    value_list,
)

SCOPED_TARGET = 5_000.0
REOPEN_TARGET_S = 2.0
SCAN_TARGET_S = 1.0
ENTRY_BUILD_RATIO_TARGET = 2.0
TARGET_BACKENDS = ("jsonl", "sqlite")
DURABILITY = {
    "memory": "in-process only",
    "jsonl": "default fsync=0: each commit is one write() to the OS (survives a process crash, "
    "not power loss)",
    "sqlite": "default WAL + synchronous=NORMAL (survives a process crash; the last commits may "
    "be lost on power loss)",
}


@dataclass(frozen=True)
class Sizes:
    runs: int
    scoped_commits: int
    session_commits: int
    reopen_records: int
    reopen_scopes: int
    reopen_runs: int
    entries: int


FULL = Sizes(
    runs=5,
    scoped_commits=5_000,
    session_commits=1_000,
    reopen_records=100_000,
    reopen_scopes=100,
    reopen_runs=3,
    entries=100_000,
)
SMOKE = Sizes(
    runs=1,
    scoped_commits=200,
    session_commits=50,
    reopen_records=2_000,
    reopen_scopes=10,
    reopen_runs=1,
    entries=2_000,
)


@dataclass(frozen=True)
class Backend:
    name: str
    module: str
    url: Callable[[Path], str]


BACKENDS = (
    Backend("memory", "turnkeep.storage.memory", lambda _: f"memory://bench-{uuid.uuid4().hex}"),
    Backend("jsonl", "turnkeep.storage.jsonl", lambda d: f"jsonl://{d / 'jsonl'}"),
    Backend("sqlite", "turnkeep.storage.sqlite", lambda d: f"sqlite://{d / 'bench.db'}"),
)


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def _fresh_session() -> str:
    return f"bench-{uuid.uuid4().hex[:12]}"


def scoped_append_rate(url: str, commits: int) -> float:
    """Commits/s of one scoped append per commit."""
    storage = open_storage(url, _fresh_session())
    frames = value_list("frames", "resp-1", ephemeral_scope("op-1"))
    payload = {"delta": "x" * 40}
    start = time.perf_counter()
    for _ in range(commits):
        storage.commit([append_list(frames, payload)])
    elapsed = time.perf_counter() - start
    storage.close()
    return commits / elapsed


def session_txn_rate(url: str, commits: int) -> float:
    """Commits/s of 10-write session transactions."""
    storage = open_storage(url, _fresh_session())
    events = value_list("events")
    parent: str | None = None
    start = time.perf_counter()
    for i in range(commits):
        entry_id = f"e{i}"
        writes: list[Write] = [
            set_value(value("op.state", f"k{j}"), {"step": i, "j": j}) for j in range(4)
        ]
        writes += [
            append_list(events, {"i": i, "j": j}, tag="t" if j == 0 else None) for j in range(4)
        ]
        writes.append(insert_entry(entry_id, parent, "message", {"text": "hello"}))
        writes.append(insert_usage(UsageRow(input_tokens=10, output_tokens=5, cost_micros=1_000)))
        storage.commit(writes)
        parent = entry_id
    elapsed = time.perf_counter() - start
    storage.close()
    return commits / elapsed


def build_reopen_session(url: str, records: int, scopes: int) -> str:
    """A session of `records` committed scoped records (one commit each: a JSONL line, an S3
    object) over `scopes` scopes, every 10th a checkpoint, then half of the scopes retired."""
    session_id = _fresh_session()
    storage = open_storage(url, session_id)
    per_scope = records // scopes
    for s in range(scopes):
        scope = ephemeral_scope(f"op-{s}")
        frames = value_list("frames", "r", scope)
        checkpoint = value("checkpoint", "c", scope)
        for i in range(per_scope):
            write = set_value(checkpoint, {"at": i}) if i % 10 == 9 else append_list(frames, i)
            storage.commit([write])
    storage.commit([retire_scope(ephemeral_scope(f"op-{s}")) for s in range(0, scopes, 2)])
    storage.close()
    return session_id


def reopen_seconds(url: str, session_id: str) -> float:
    """Seconds to open the session and serve its first reads."""
    start = time.perf_counter()
    storage = open_storage(url, session_id)
    storage.get_stats()
    storage.read_list(value_list("frames", "r", ephemeral_scope("op-1")), limit=1)
    elapsed = time.perf_counter() - start
    storage.close()
    return elapsed


def build_entries_seconds(url: str, count: int) -> tuple[str, float]:
    """(session id, seconds) to insert `count` entries, one per commit, each the child of the
    previous one (a transcript)."""
    session_id = _fresh_session()
    storage = open_storage(url, session_id)
    parent: str | None = None
    start = time.perf_counter()
    for i in range(count):
        entry_id = f"m{i}"
        storage.commit([insert_entry(entry_id, parent, "message", {"role": "user", "text": "hi"})])
        parent = entry_id
    elapsed = time.perf_counter() - start
    storage.close()
    return session_id, elapsed


def reopen_scan_seconds(url: str, session_id: str, count: int) -> float:
    """Seconds to open the session and scan every entry."""
    start = time.perf_counter()
    storage = open_storage(url, session_id)
    scanned = storage.scan_entries()
    elapsed = time.perf_counter() - start
    storage.close()
    if len(scanned) != count:
        raise AssertionError(f"scan_entries returned {len(scanned)} entries, expected {count}")
    return elapsed


def run_backend(backend: Backend, sizes: Sizes, workdir: Path) -> dict[str, float]:
    url = backend.url(workdir)
    scoped = [scoped_append_rate(url, sizes.scoped_commits) for _ in range(sizes.runs)]
    session = [session_txn_rate(url, sizes.session_commits) for _ in range(sizes.runs)]
    sid = build_reopen_session(url, sizes.reopen_records, sizes.reopen_scopes)
    reopen = [reopen_seconds(url, sid) for _ in range(sizes.reopen_runs)]
    built = [build_entries_seconds(url, sizes.entries) for _ in range(sizes.reopen_runs)]
    scan = [reopen_scan_seconds(url, built[0][0], sizes.entries) for _ in range(sizes.reopen_runs)]
    return {
        "scoped": statistics.median(scoped),
        "session": statistics.median(session),
        "reopen": statistics.median(reopen),
        "entries_build": statistics.median(seconds for _, seconds in built),
        "entries_scan": statistics.median(scan),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes for CI")
    parser.add_argument("--backend", action="append", help="only these backends (repeatable)")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    chosen = [b for b in BACKENDS if not args.backend or b.name in args.backend]
    print(
        f"storage bench ({'smoke' if args.smoke else 'full'}): medians of {sizes.runs} runs; "
        f"{sizes.scoped_commits} scoped append commits, {sizes.session_commits} 10-write "
        f"session commits, reopen of {sizes.reopen_records:,} records / {sizes.reopen_scopes} "
        f"scopes (half retired), median of {sizes.reopen_runs}; {sizes.entries:,} entries inserted "
        f"one per commit, then reopen + scan_entries, median of {sizes.reopen_runs}"
    )
    header = (
        f"{'backend':<8} {'scoped appends/s':>17} {'10-write txns/s':>16} {'reopen s':>9} "
        f"{'entries insert s':>17} {'reopen+scan s':>14}"
    )
    print(header)
    print("-" * len(header))
    misses: list[str] = []
    failures: list[str] = []
    results: dict[str, dict[str, float]] = {}
    for backend in chosen:
        if not _available(backend.module):
            print(f"{backend.name:<8} not available ({backend.module} is missing)")
            continue
        try:
            with tempfile.TemporaryDirectory(prefix="turnkeep-bench-") as tmp:
                figures = run_backend(backend, sizes, Path(tmp))
        except Exception as exc:  # a broken backend must not hide the others' figures
            print(f"{backend.name:<8} failed: {type(exc).__name__}: {exc}")
            failures.append(backend.name)
            continue
        results[backend.name] = figures
        print(
            f"{backend.name:<8} {figures['scoped']:>17,.0f} {figures['session']:>16,.0f} "
            f"{figures['reopen']:>9.3f} {figures['entries_build']:>17.2f} "
            f"{figures['entries_scan']:>14.3f}"
        )
        if backend.name in TARGET_BACKENDS and not args.smoke:
            if figures["scoped"] < SCOPED_TARGET:
                misses.append(f"{backend.name}: {figures['scoped']:,.0f} scoped appends/s")
            if figures["reopen"] >= REOPEN_TARGET_S:
                misses.append(f"{backend.name}: reopen {figures['reopen']:.2f} s")
    if "jsonl" in results:
        jsonl = results["jsonl"]
        ratio = ""
        if "sqlite" in results:
            build_ratio = jsonl["entries_build"] / results["sqlite"]["entries_build"]
            ratio = f", inserts {build_ratio:.2f}x sqlite's time"
            if not args.smoke and build_ratio > ENTRY_BUILD_RATIO_TARGET:
                misses.append(f"jsonl: entry inserts {build_ratio:.2f}x sqlite")
        if not args.smoke and jsonl["entries_scan"] > SCAN_TARGET_S:
            misses.append(f"jsonl: reopen + scan of entries {jsonl['entries_scan']:.2f} s")
        print(f"jsonl entries: reopen + scan {jsonl['entries_scan']:.3f} s{ratio}")
    for backend in chosen:
        print(f"durability {backend.name}: {DURABILITY[backend.name]}")
    if not args.smoke:
        print(
            f"targets (jsonl, sqlite): >= {SCOPED_TARGET:,.0f} scoped appends/s, "
            f"reopen < {REOPEN_TARGET_S:.0f} s; jsonl reopen + scan of {sizes.entries:,} entries "
            f"<= {SCAN_TARGET_S:.0f} s, inserts <= {ENTRY_BUILD_RATIO_TARGET:.0f}x sqlite: "
            + ("met" if not misses else "MISSED: ")
            + "; ".join(misses)
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
