"""What tracing adds to a turn: wall time, storage commits and OTLP export requests with the
exporter off and on (docs/tracing.md).

Runs turns of three model rounds and four tool calls (scripted model, SQLite in a temp dir)
through the in-process orchestrator in three modes, interleaved turn by turn so drift hits
each alike: `off` (no OTLP endpoint: no OpenTelemetry import), `on` (the SDK's OTLP/HTTP
exporter to a real receiver on 127.0.0.1, batch export as in `turnkeep serve`) and
`on+flush` (a flush after every step, as the Lambda handlers do). Prints per mode the median
and p90 milliseconds per turn, the ratio to `off`, storage commits, spans and OTLP requests
per turn. `--smoke` runs 4 turns per mode (CI).

Then the same turns the way a stack runs them ("deployed"): template.yaml's state machine under
moto's Step Functions interpreter with the real step handlers (tests/support/state_machine.py),
tracing switched as the template's `OtlpEndpoint` parameter switches it
(`OTEL_EXPORTER_OTLP_ENDPOINT`), each handler flushing as on Lambda: per mode the median ms, the
DynamoDB+S3 requests of every step's Lambda, spans and OTLP requests per turn.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.iam_policy import recording_aws_calls
from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver
from tests.support.state_machine import deploy
from tests.support.state_machine import run_turn as run_deployed_turn
from turnkeep import telemetry
from turnkeep.envelope import open_envelope_store
from turnkeep.harness import HarnessDeps, HarnessLimits, orchestrator, run_turn
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import CommitResult, Storage, Value, Write, open_storage
from turnkeep.tools.builtin import builtin_tools

SCRIPT = (
    'call calculator {"expression": "6*7"}\n'
    'call echo {"text": "a"}\n'
    "then\n"
    'call calculator {"expression": "2**10"}\n'
    'call echo {"text": "b"}'
)
MODES = ("off", "on", "on+flush")


class Commits:
    """Counts storage commits (every backend request that writes)."""

    def __init__(self) -> None:
        self.count = 0


class CountingStorage:
    def __init__(self, inner: Storage, commits: Commits) -> None:
        self._inner, self._commits = inner, commits

    def commit(
        self, writes: Sequence[Write], *, guard: Value | None = None, **options: Any
    ) -> CommitResult:
        self._commits.count += 1
        return self._inner.commit(writes, guard=guard, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def _mode(mode: str, receiver: OtlpReceiver) -> Iterator[None]:
    """The environment (and step wrapping) of one mode."""
    steps = ("model_step", "tool_step", "finish_turn", "fail_turn")
    saved = {name: getattr(orchestrator, name) for name in steps}
    if mode == "off":
        os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    else:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    if mode == "on+flush":
        for name, step in saved.items():
            setattr(orchestrator, name, _flushing(step))
    try:
        yield
    finally:
        for name, step in saved.items():
            setattr(orchestrator, name, step)
        telemetry.flush()


def _flushing(step: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return step(*args, **kwargs)
        finally:
            telemetry.flush()

    return wrapper


def run(turns: int) -> None:
    os.environ.pop("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None)
    with tempfile.TemporaryDirectory() as tmp, otlp_receiver() as receiver:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
        commits = Commits()
        deps = HarnessDeps(
            open_storage=lambda sid: CountingStorage(open_storage(url, sid), commits),
            envelopes=envelopes,
            provider=ScriptedProvider(),
            tools=lambda _s, _u: builtin_tools(),
            limits=HarnessLimits(frame_interval_ms=0),
        )
        times: dict[str, list[float]] = {m: [] for m in MODES}
        commit_counts: dict[str, list[int]] = {m: [] for m in MODES}
        requests: dict[str, int] = dict.fromkeys(MODES, 0)
        spans: dict[str, int] = dict.fromkeys(MODES, 0)
        for i in range(turns + 1):  # the first round of turns warms up (imports, SQLite)
            for mode in MODES:
                sid = f"{mode.replace('+', '-')}-{i}"
                envelopes.create(sid, "u1")
                with _mode(mode, receiver):
                    before_requests, before_spans = receiver.requests, len(receiver.snapshot())
                    before_commits = commits.count
                    start = time.perf_counter()
                    result = run_turn(deps, sid, "u1", SCRIPT)
                    elapsed = time.perf_counter() - start
                    if mode == "on":
                        telemetry.flush()  # counted here: a batch covers the whole turn
                if result.status != "completed":
                    raise SystemExit(f"{mode} turn {i} ended {result.status}: {result.error}")
                if i == 0:
                    continue
                times[mode].append(elapsed * 1000)
                commit_counts[mode].append(commits.count - before_commits)
                requests[mode] += receiver.requests - before_requests
                spans[mode] += len(receiver.snapshot()) - before_spans
        _print(turns, times, commit_counts, requests, spans)


def _print(
    turns: int,
    times: dict[str, list[float]],
    commits: dict[str, list[int]],
    requests: dict[str, int],
    spans: dict[str, int],
) -> None:
    base = statistics.median(times["off"])
    print(f"tracing overhead per turn: {turns} turns per mode (3 model rounds, 4 tool calls)")
    print(
        f"{'mode':<10}{'median ms':>11}{'p90 ms':>9}{'ratio':>8}"
        f"{'commits':>9}{'spans':>7}{'OTLP requests':>15}"
    )
    for mode in MODES:
        ms = sorted(times[mode])
        p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
        median = statistics.median(ms)
        print(
            f"{mode:<10}{median:>11.2f}{p90:>9.2f}{median / base:>8.2f}"
            f"{statistics.median(commits[mode]):>9.0f}{spans[mode] / turns:>7.1f}"
            f"{requests[mode] / turns:>15.1f}"
        )
    added = statistics.median(times["on+flush"]) - base
    print(f"added by tracing with a flush per step (Lambda): {added:+.2f} ms a turn (median)")


def deployed(turns: int) -> None:
    """Print the deployed rows: off and on, `turns` turns each after one warm turn."""
    import pytest

    from turnkeep.aws_lambda import container

    print(f"deployed (template's state machine under moto): {turns} turns per mode")
    print(f"{'mode':<10}{'median ms':>11}{'storage requests':>18}{'spans':>7}{'OTLP requests':>15}")
    with otlp_receiver() as receiver:
        for mode in ("off", "on"):
            monkeypatch = pytest.MonkeyPatch()
            env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url} if mode == "on" else {}
            if mode == "off":
                monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
            times: list[float] = []
            storage: list[int] = []
            before_requests, before_spans = receiver.requests, len(receiver.snapshot())
            try:
                with deploy(
                    monkeypatch, "STANDARD", POWERTOOLS_METRICS_DISABLED="true", **env
                ) as stack:
                    session = f"s-{uuid.uuid4().hex[:10]}"
                    run_deployed_turn(stack, session, SCRIPT)  # warm
                    telemetry.flush()
                    before_requests, before_spans = receiver.requests, len(receiver.snapshot())
                    for _ in range(turns):
                        with recording_aws_calls(stack.host.current_function) as log:
                            start = time.perf_counter()
                            _op, output = run_deployed_turn(stack, session, SCRIPT)
                            times.append((time.perf_counter() - start) * 1000)
                        if output["status"] != "completed":
                            raise SystemExit(f"deployed {mode}: {output}")
                        storage.append(sum(1 for c in log.calls if c.service in ("dynamodb", "s3")))
            finally:
                monkeypatch.undo()
                container.reset_runtime()
            telemetry.flush()
            spans = (len(receiver.snapshot()) - before_spans) / turns
            requests = (receiver.requests - before_requests) / turns
            print(
                f"{mode:<10}{statistics.median(times):>11.2f}"
                f"{statistics.median(storage):>18.0f}{spans:>7.1f}{requests:>15.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="4 turns per mode (CI)")
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    run(4 if args.smoke else args.turns)
    deployed(2 if args.smoke else 10)


if __name__ == "__main__":
    main()
