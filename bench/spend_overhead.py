"""What budgets add to a turn: requests and milliseconds, with and without the spend ledger and
budgets, on SQLite and on AWS (DynamoDB + S3 under moto, in process).

Each turn is the scripted model's two rounds with one tool call (`call echo`), priced at
$1 / $1 per million tokens. "off": no ledger, no budget (a deployment before issue #33);
"budgets": the ledger charged each round and every budget set high enough never to stop a turn
(turn tokens and cost, session, user per day, deployment per day), so every check runs. AWS
requests are botocore calls counted on the storage's and the ledger's clients (one client per
service, shared); SQLite has no request count, only time. Medians over the turns; the ratio is
budgets / off. docs/usage.md quotes the figures.

The "deployed" rows run the same turns the way a stack runs them: template.yaml's state machine
executed by moto's Step Functions interpreter with the real step handlers
(tests/support/state_machine.py), the budgets given as the template gives them
(`TURNKEEP_BUDGET_*` from its Budget* parameters) and the price in the model spec
(`scripted?price=1,1`); requests are every DynamoDB and S3 call of every step's Lambda.

    .venv/bin/python bench/spend_overhead.py            # 30 turns per case
    .venv/bin/python bench/spend_overhead.py --smoke    # 3 turns per case (CI)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.aws_template import create_bucket, create_table
from tests.support.iam_policy import recording_aws_calls
from tests.support.state_machine import deploy
from tests.support.state_machine import run_turn as run_deployed_turn
from turnkeep import Agent
from turnkeep.envelope import open_envelope_store
from turnkeep.harness import HarnessDeps, HarnessLimits, run_turn
from turnkeep.plumbing.clients import shared_client
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.spend.budgets import Budgets
from turnkeep.spend.factory import open_ledger
from turnkeep.storage import open_storage
from turnkeep.storage.aws.instrument import RequestCounter

USER = "bench-user"
TEXT = 'call echo {"text": "x"}'
REGION = "us-east-1"
HIGH = Budgets(
    turn_tokens=10**9,
    turn_cost="1000",
    session_cost="1000",
    user_daily_cost="1000",
    deployment_daily_cost="1000",
)


def _deps(storage_url: str, envelope_url: str, *, budgets: bool) -> HarnessDeps:
    agent = Agent(model_settings={"price": "1,1"}, budgets=HIGH if budgets else None)
    return HarnessDeps(
        open_storage=lambda sid: open_storage(storage_url, sid),
        envelopes=open_envelope_store(envelope_url),
        provider=ScriptedProvider(),
        limits=HarnessLimits(frame_interval_ms=0),
        agent=agent,
        ledger=open_ledger(envelope_url) if budgets else None,
    )


LAST_CALLS: dict[str, dict[str, int]] = {}
"""The requests of the last measured turn of each AWS case, by operation."""


def _turns(deps: HarnessDeps, count: int, counter: RequestCounter | None) -> tuple[float, float]:
    """Median ms and median requests of `count` turns in one session."""
    session = f"s-{uuid.uuid4().hex[:10]}"
    deps.envelopes.create(session, USER)
    run_turn(deps, session, USER, TEXT)  # warm: first use of the clients and the tables
    times, requests = [], []
    for _ in range(count):
        if counter is not None:
            counter.reset()
        started = time.perf_counter()
        result = run_turn(deps, session, USER, TEXT)
        times.append((time.perf_counter() - started) * 1000)
        assert result.status == "completed", result.error
        requests.append(counter.total if counter is not None else 0)
    if counter is not None:
        LAST_CALLS["budgets" if deps.ledger is not None else "off"] = dict(counter.calls)
    return statistics.median(times), statistics.median(requests)


def sqlite_case(count: int, budgets: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        deps = _deps(url, url, budgets=budgets)
        try:
            return _turns(deps, count, None)
        finally:
            deps.envelopes.close()
            if deps.ledger is not None:
                deps.ledger.close()


def aws_case(count: int, budgets: bool) -> tuple[float, float]:
    with mock_aws():
        table, bucket = f"t-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
        create_table(boto3.client("dynamodb", region_name=REGION), table)
        create_bucket(boto3.client("s3", region_name=REGION), bucket)
        deps = _deps(
            f"aws://?table={table}&bucket={bucket}&prefix=bench&region={REGION}",
            f"aws://?table={table}&region={REGION}",
            budgets=budgets,
        )
        counter = RequestCounter().attach(
            shared_client("dynamodb", REGION), shared_client("s3", REGION)
        )
        try:
            return _turns(deps, count, counter)
        finally:
            counter.detach(shared_client("dynamodb", REGION), shared_client("s3", REGION))
            deps.envelopes.close()


DEPLOYED_BUDGETS = {
    "TURNKEEP_BUDGET_TURN_TOKENS": str(HIGH.turn_tokens),
    "TURNKEEP_BUDGET_TURN_COST": "1000",
    "TURNKEEP_BUDGET_SESSION_COST": "1000",
    "TURNKEEP_BUDGET_USER_DAILY_COST": "1000",
    "TURNKEEP_BUDGET_DEPLOYMENT_DAILY_COST": "1000",
}
"""Every deployment budget set, high (the template's Budget* parameters, as environment)."""


def deployed_case(count: int, budgets: bool) -> tuple[float, float]:
    """Median ms and median DynamoDB+S3 requests of `count` turns through the state machine."""
    from turnkeep.aws_lambda import container

    monkeypatch = pytest.MonkeyPatch()
    env = DEPLOYED_BUDGETS if budgets else {}
    try:
        # EMF lines would fill the figures; the metrics cost no storage request.
        with deploy(monkeypatch, "STANDARD", POWERTOOLS_METRICS_DISABLED="true", **env) as deployed:
            session = f"s-{uuid.uuid4().hex[:10]}"
            model = "scripted?price=1,1"
            run_deployed_turn(deployed, session, TEXT, model=model)  # warm
            times, requests = [], []
            for _ in range(count):
                with recording_aws_calls(deployed.host.current_function) as log:
                    started = time.perf_counter()
                    _op, output = run_deployed_turn(deployed, session, TEXT, model=model)
                    times.append((time.perf_counter() - started) * 1000)
                assert output["status"] == "completed", output
                calls = [c for c in log.calls if c.service in ("dynamodb", "s3")]
                requests.append(len(calls))
                by_op: dict[str, int] = {}
                for call in calls:
                    by_op[call.operation] = by_op.get(call.operation, 0) + 1
                LAST_CALLS["deployed budgets" if budgets else "deployed off"] = by_op
            return statistics.median(times), statistics.median(requests)
    finally:
        monkeypatch.undo()
        container.reset_runtime()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="3 turns per case (CI)")
    args = parser.parse_args()
    count = 3 if args.smoke else 30
    cases: list[tuple[str, Callable[[int, bool], tuple[float, float]]]] = [
        ("sqlite", sqlite_case),
        ("aws (moto)", aws_case),
        ("deployed", deployed_case),
    ]
    print(f"spend overhead per turn (2 model rounds + 1 tool call), median of {count} turns")
    print(f"{'backend':<12} {'case':<8} {'ms':>8} {'requests':>9}")
    for name, case in cases:
        off_ms, off_req = case(count, False)
        on_ms, on_req = case(count, True)
        print(f"{name:<12} {'off':<8} {off_ms:>8.2f} {off_req:>9.0f}")
        print(f"{name:<12} {'budgets':<8} {on_ms:>8.2f} {on_req:>9.0f}")
        req_text = f", requests +{on_req - off_req:.0f}" if off_req else ""
        print(
            f"{name:<12} {'ratio':<8} {on_ms / off_ms:>8.2f}x (+{on_ms - off_ms:.2f} ms{req_text})"
        )
    for label, off_key, on_key in (
        ("aws (moto)", "off", "budgets"),
        ("deployed", "deployed off", "deployed budgets"),
    ):
        off, on = LAST_CALLS.get(off_key, {}), LAST_CALLS.get(on_key, {})
        added = {k: on.get(k, 0) - off.get(k, 0) for k in sorted({*off, *on})}
        print(
            f"{label} requests budgets add, by operation (last turn):",
            {k: v for k, v in added.items() if v},
        )


if __name__ == "__main__":
    main()
