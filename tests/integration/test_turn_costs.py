"""A turn's rounds are priced from their measured usage: each usage row holds its cost in
integer micro-dollars and its turn, the turn's result sums them and the session stats roll them
up, on the memory and SQLite backends (docs/usage.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.turns_support import USER, make_turn_harness
from turnkeep import Agent
from turnkeep.harness import run_turn
from turnkeep.providers.prices import parse_price

PRICE = "2,10,0.2,2.5"


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_each_round_is_priced_and_the_turn_and_session_sum_the_rounds(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    h.deps.agent = Agent(model_settings={"price": PRICE})

    first = run_turn(h.deps, h.session_id, USER, 'call echo {"text": "x"}', op_id="op-a")
    second = run_turn(h.deps, h.session_id, USER, "hello there", op_id="op-b")

    price = parse_price(PRICE)
    with h.storage() as storage:
        rows = storage.snapshot().usage
        stats = storage.get_stats()
    assert [row.op_id for row in rows] == ["op-a", "op-a", "op-b"]
    for row in rows:
        # $2 / $10 per million tokens are 2 / 10 micro-dollars a token.
        assert row.cost_micros == row.input_tokens * 2 + row.output_tokens * 10
        assert row.cost_micros > 0
    assert first.usage.cost_micros == sum(r.cost_micros for r in rows if r.op_id == "op-a")
    assert second.usage.cost_micros == rows[2].cost_micros
    assert stats.cost_micros == first.usage.cost_micros + second.usage.cost_micros
    assert price.cost_micros(second.usage) == second.usage.cost_micros


def test_a_turn_of_an_unpriced_local_model_costs_zero(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)

    result = run_turn(h.deps, h.session_id, USER, "hello there")

    with h.storage() as storage:
        rows = storage.snapshot().usage
    assert result.usage.input_tokens > 0
    assert result.usage.cost_micros == 0
    assert [row.cost_micros for row in rows] == [0]
