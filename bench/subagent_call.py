"""What a sub-agent call costs on AWS against a function tool call: the template's state
machine executed by moto's Step Functions interpreter, the real step handlers, DynamoDB and S3
under moto (tests/support/state_machine.py), the agent `tests.support.subagent_agents:agent`.

Two turns of one tool call each: `call count_words {...}` (a function tool) and `call research
{"input": "..."}` (a sub-agent whose child turn answers in one round). Per turn it counts the
DynamoDB and S3 requests of every Lambda invocation (a botocore hook), the Lambda invocations,
the Step Functions state transitions (every execution's `...StateEntered` history events: the
child's execution included) and the executions; medians over the runs, and the ratios.

    .venv/bin/python bench/subagent_call.py            # 5 turns per case
    .venv/bin/python bench/subagent_call.py --smoke    # 1 turn per case (CI)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest

from tests.support.iam_policy import recording_aws_calls
from tests.support.state_machine import Deployed, deploy, run_turn
from turnkeep.aws_lambda import container
from turnkeep.runtime.agent_loading import forget_agents

CASES = {
    "function tool": 'call count_words {"text": "a b c"}',
    "sub-agent": "call research " + json.dumps({"input": "summarise the release"}),
}


@dataclass
class Figures:
    """One turn's cost."""

    storage_requests: int
    invocations: int
    transitions: int
    executions: int


def _transitions(deployed: Deployed, since: set[str]) -> tuple[int, int]:
    """State transitions and executions of the executions not in `since`."""
    listed = deployed.sfn.list_executions(stateMachineArn=deployed.state_machine_arn)
    new = [e["executionArn"] for e in listed["executions"] if e["executionArn"] not in since]
    entered = 0
    for arn in new:
        pages = deployed.sfn.get_paginator("get_execution_history").paginate(executionArn=arn)
        for page in pages:
            entered += sum(1 for e in page["events"] if e["type"].endswith("StateEntered"))
        since.add(arn)
    return entered, len(new)


def _turn(deployed: Deployed, session: str, text: str, seen: set[str]) -> Figures:
    calls_before = len(deployed.host.calls)
    with recording_aws_calls(deployed.host.current_function) as log:
        _op, output = run_turn(deployed, session, text)
    if output["status"] != "completed":
        raise SystemExit(f"{session}: the turn ended {output['status']}: {output}")
    by_service = Counter(c.service for c in log.calls)
    transitions, executions = _transitions(deployed, seen)
    return Figures(
        storage_requests=by_service["dynamodb"] + by_service["s3"],
        invocations=len(deployed.host.calls) - calls_before,
        transitions=transitions,
        executions=executions,
    )


def _median(values: list[int]) -> float:
    return float(statistics.median(values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one turn per case (CI)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    runs = 1 if args.smoke else args.runs
    logging.disable(logging.WARNING)  # moto's interpreter logs every caught step error
    monkeypatch = pytest.MonkeyPatch()
    results: dict[str, list[Figures]] = {name: [] for name in CASES}
    try:
        with tempfile.TemporaryDirectory() as flags:
            monkeypatch.setenv("TURNKEEP_AGENT", "tests.support.subagent_agents:agent")
            monkeypatch.setenv("TURNKEEP_CHILD_TURNS", "execution")
            monkeypatch.setenv("SUBAGENT_FLAG_DIR", flags)
            with deploy(monkeypatch, "STANDARD") as deployed:
                monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", deployed.state_machine_arn)
                forget_agents()
                container.reset_runtime()
                seen: set[str] = set()
                for run in range(runs):
                    for name, text in CASES.items():
                        session = f"bench-{name.replace(' ', '-')}-{run}"
                        results[name].append(_turn(deployed, session, text, seen))
    finally:
        monkeypatch.undo()
        container.reset_runtime()
    _print(results, runs)
    return 0


def _print(results: dict[str, list[Figures]], runs: int) -> None:
    print(f"one tool call per turn, STANDARD, moto; median of {runs} turn(s) per case")
    fields = ("storage_requests", "invocations", "transitions", "executions")
    print(f"{'case':<14} " + " ".join(f"{f:>17}" for f in fields))
    medians: dict[str, dict[str, float]] = {}
    for name, figures in results.items():
        medians[name] = {f: _median([getattr(x, f) for x in figures]) for f in fields}
        print(f"{name:<14} " + " ".join(f"{medians[name][f]:>17.0f}" for f in fields))
    base, sub = medians["function tool"], medians["sub-agent"]
    ratios = " ".join(f"{sub[f] / base[f]:>16.2f}x" if base[f] else f"{'-':>17}" for f in fields)
    print(f"{'ratio':<14} {ratios}")


if __name__ == "__main__":
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    sys.exit(main())
