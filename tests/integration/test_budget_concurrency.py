"""20 turns of one user at once against a daily budget: the counter is atomic (SQLite write
transactions; DynamoDB transactions on moto), every round is charged exactly once, and the
overrun past the budget is at most the rounds in flight when it was reached: one round per
concurrent turn (docs/usage.md, "Budgets")."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.turns_support import USER, make_turn_harness
from tests.support.spend_ledgers import open_test_ledger
from turnkeep import Agent
from turnkeep.harness import TurnResult, run_turn
from turnkeep.spend.ledger import SpendLedger, utc_day

TURNS = 20
BUDGET_MICROS = 4_000


@pytest.fixture(params=["sqlite", "dynamodb"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SpendLedger]:
    with open_test_ledger(request.param, tmp_path) as made:
        yield made


def test_twenty_concurrent_turns_of_a_user_overrun_a_daily_budget_by_at_most_the_rounds_in_flight(
    tmp_path: Path, ledger: SpendLedger
) -> None:
    h = make_turn_harness(tmp_path, "sqlite")
    h.deps.agent = Agent(
        model_settings={"price": "1,1"}, budgets={"user_daily_cost": f"{BUDGET_MICROS / 1e6:.6f}"}
    )
    h.deps.ledger = ledger
    sessions = [f"{h.session_id}-{n}" for n in range(TURNS)]
    for sid in sessions:
        h.envelopes.create(sid, USER)

    def turns_of(sid: str) -> list[TurnResult]:
        done: list[TurnResult] = []
        for _ in range(10):  # each session runs turns until the budget stops one
            done.append(run_turn(h.deps, sid, USER, 'call echo {"text": "x"}'))
            if done[-1].status != "completed":
                break
        return done

    with ThreadPoolExecutor(max_workers=TURNS) as pool:
        results = [r for rs in pool.map(turns_of, sessions) for r in rs]

    day = utc_day(h.clock())
    charged = ledger.day_totals(USER, day).user_micros
    spent = sum(r.usage.cost_micros for r in results)
    assert charged == spent  # every round charged once, none lost in the race
    stopped = [r for r in results if r.status == "failed"]
    assert len(stopped) == TURNS
    assert all(
        (r.error or "").startswith("budget_exceeded: your daily cost budget") for r in stopped
    )
    # The bound of docs/usage.md: past the budget, at most one round per turn in flight.
    rounds = []
    for sid in sessions:
        with h.deps.open_storage(sid) as storage:
            rounds += [row.cost_micros for row in storage.snapshot().usage]
    assert sum(rounds) == charged
    biggest_round = max(rounds)
    assert BUDGET_MICROS <= charged <= BUDGET_MICROS + TURNS * biggest_round
