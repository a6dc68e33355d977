"""Spend metrics: every round the ledger counts reaches `on_charge` once, and the Lambdas'
`publish_charge` prints it as one EMF document (tokens and cost, dimension `model`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.turns_support import USER, make_turn_harness
from turnkeep import Agent
from turnkeep.aws_lambda.spend_metrics import publish_charge
from turnkeep.harness import run_turn
from turnkeep.providers.base import Usage
from turnkeep.spend.ledger import Charge, MemoryLedger


def test_each_counted_round_is_seen_once_by_on_charge(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = Agent(model_settings={"price": "1,1"})
    h.deps.ledger = MemoryLedger()
    seen: list[Charge] = []
    h.deps.on_charge = seen.append

    result = run_turn(h.deps, h.session_id, USER, 'call echo {"text": "x"}')

    assert [c.key.rsplit(":", 1)[-1] for c in seen] == ["r0", "r1"]
    assert sum(c.usage.cost_micros for c in seen) == result.usage.cost_micros
    assert h.deps.ledger.charge(seen[0]) is False  # a redelivery: not counted, not seen


def test_publish_charge_prints_one_emf_document_per_round_by_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    usage = Usage(1_200, 300, 40, 5, cost_micros=8_112)
    publish_charge(Charge("op:r0", "u1", "s1", "amazon.nova-lite-v1:0", "2026-12-02", usage))

    document = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    directive = document["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "turnkeep"
    assert any("model" in dimensions for dimensions in directive["Dimensions"])
    assert document["model"] == "amazon.nova-lite-v1:0"
    assert {m["Name"] for m in directive["Metrics"]} == {
        "InputTokens",
        "OutputTokens",
        "CacheReadTokens",
        "CacheWriteTokens",
        "CostMicros",
    }
    assert (document["InputTokens"], document["CostMicros"]) == ([1_200.0], [8_112.0])
