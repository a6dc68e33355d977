"""Harness overhead per turn: scripted model on SQLite, time and storage commits per step.

Runs turns of two model rounds with two tool calls each (plus a final reply round) through the
in-process orchestrator and prints, per model round and per tool step: median wall time and
storage commits (split into session and operation-scope commits) and envelope writes. A second
table shows how storage commits of a model round follow the reply length: one frame append per
50 ms or 2 KiB of reply (coalesced), never one per token. Then long sessions (issue #12,
`bench/helpers/long_session.py`): bytes read and tokens sent per cold model round at 100 / 1,000 /
10,000 prior messages with and without compaction on AWS (moto), and a 2,000-turn session on a
small budget on SQLite and on AWS (moto). `--smoke` runs small sizes only (CI).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import long_session

from turnkeep.envelope import open_envelope_store
from turnkeep.harness import HarnessDeps, HarnessLimits, orchestrator, run_turn, steps
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import CommitResult, Storage, Value, Write, open_storage
from turnkeep.storage.writes import build_transaction

SCRIPT = (
    'call calculator {"expression": "6*7"}\n'
    'call echo {"text": "a"}\n'
    "then\n"
    'call calculator {"expression": "2**10"}\n'
    'call echo {"text": "b"}'
)


class Meter:
    """Counts commits and times by the step that is running."""

    def __init__(self) -> None:
        self.current = "other"
        self.commits: Counter[str] = Counter()
        self.times: dict[str, list[float]] = {"model": [], "tool": []}
        self.envelope_writes: Counter[str] = Counter()


class CountingStorage:
    """Delegates to a Storage and counts commits per (step, scope kind)."""

    def __init__(self, inner: Storage, meter: Meter) -> None:
        self._inner = inner
        self._meter = meter

    def commit(
        self, writes: Sequence[Write], *, guard: Value | None = None, **options: Any
    ) -> CommitResult:
        kind = "session" if build_transaction(writes).is_session else "scope"
        self._meter.commits[f"{self._meter.current}.{kind}"] += 1
        return self._inner.commit(writes, guard=guard, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _timed(meter: Meter, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        meter.current = label
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            meter.times[label].append(time.perf_counter() - start)
            meter.current = "other"

    return wrapper


def _deps(db: Path, meter: Meter) -> tuple[HarnessDeps, Any, Storage]:
    url = f"sqlite:///{db}"
    # Held open for the run, like local mode does: closing SQLite's last connection checkpoints
    # the WAL (milliseconds), which would otherwise be paid by every step's handle close.
    keeper = open_storage(url, "keeper")
    envelopes = open_envelope_store(f"sqlite:///{db.with_suffix('.envelopes.db')}")
    original_update = envelopes.update_worker_meta

    def counted_update(*args: Any, **kwargs: Any) -> Any:
        meter.envelope_writes[meter.current] += 1
        return original_update(*args, **kwargs)

    envelopes.update_worker_meta = counted_update  # type: ignore[method-assign]
    deps = HarnessDeps(
        open_storage=lambda sid: CountingStorage(open_storage(url, sid), meter),  # type: ignore[arg-type,return-value]
        envelopes=envelopes,
        provider=ScriptedProvider(),
        limits=HarnessLimits(tool_parallelism=1),
    )
    return deps, envelopes, keeper


def _instrument(meter: Meter) -> None:
    # The orchestrator calls the step functions through its module globals.
    orchestrator.model_step = _timed(meter, "model", steps.model_step)  # type: ignore[attr-defined]
    orchestrator.tool_step = _timed(meter, "tool", steps.tool_step)  # type: ignore[attr-defined]


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.2f} ms" if values else "-"


def run(turns: int) -> None:
    """Measure `turns` turns and print the tables."""
    meter = Meter()
    _instrument(meter)
    with tempfile.TemporaryDirectory() as tmp:
        deps, envelopes, keeper = _deps(Path(tmp) / "bench.db", meter)
        session = f"bench-{uuid.uuid4().hex[:8]}"
        envelopes.create(session, "bench-user")
        turn_times = []
        for _ in range(turns):
            start = time.perf_counter()
            result = run_turn(deps, session, "bench-user", SCRIPT)
            turn_times.append(time.perf_counter() - start)
            assert result.status == "completed", result
        rounds = len(meter.times["model"])
        tools = len(meter.times["tool"])
        print(f"turn_bench: {turns} turns on SQLite, {rounds} model rounds, {tools} tool steps")
        print(f"  per turn (3 model rounds, 4 tool steps): median {_ms(turn_times)}")
        for label, count in (("model round", rounds), ("tool step", tools)):
            key = "model" if label == "model round" else "tool"
            print(
                f"  per {label:<11}: median {_ms(meter.times[key])}, "
                f"session commits {meter.commits[key + '.session'] / count:.2f}, "
                f"scope commits {meter.commits[key + '.scope'] / count:.2f}, "
                f"envelope writes {meter.envelope_writes[key] / count:.2f}"
            )
        other = meter.commits["other.session"] + meter.commits["other.scope"]
        print(
            f"  per turn outside steps (start + finish): storage commits {other / turns:.2f}, "
            f"envelope writes {meter.envelope_writes['other'] / turns:.2f}"
        )
        print("  reply length vs storage commits of that model round (50 ms / 2 KiB frames):")
        for words in (10, 1000, 10000):
            before = meter.commits.copy()
            run_turn(deps, session, "bench-user", " ".join(["word"] * words))
            spent = (meter.commits - before)["model.scope"] + (meter.commits - before)[
                "model.session"
            ]
            print(f"    {words:>6} words: {spent} commits")
        envelopes.close()
        keeper.close()


def main() -> None:
    """Parse arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few turns only (CI)")
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument(
        "--prior", type=int, nargs="+", default=[100, 1000, 10000], help="prior messages"
    )
    parser.add_argument("--sqlite-turns", type=int, default=2000, help="long session on SQLite")
    parser.add_argument("--aws-turns", type=int, default=2000, help="long session on moto")
    args = parser.parse_args()
    run(3 if args.smoke else args.turns)
    print("long sessions (context budget, compaction, bounded reads):")
    long_session.print_cold_rounds([100, 200] if args.smoke else args.prior)
    long_session.many_turns("sqlite", 60 if args.smoke else args.sqlite_turns)
    long_session.many_turns(
        "aws", 12 if args.smoke else args.aws_turns, progress=0 if args.smoke else 250
    )


if __name__ == "__main__":
    main()
