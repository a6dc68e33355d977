"""Budgets stop a turn: before a round whose worst case (input estimate + output cap, priced)
would go over, and after a round whose measured cost went over; the turn fails with code
`budget_exceeded`, its text so far kept, and the error names the budget and the figures
(docs/usage.md, "Budgets"). On the memory and SQLite backends, with the ledger of each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.turns_support import USER, Harness, make_turn_harness
from turnkeep import Agent
from turnkeep.harness import TurnResult, run_turn
from turnkeep.spend.budgets import Budgets
from turnkeep.spend.ledger import MemoryLedger, utc_day
from turnkeep.spend.ledger_sqlite import SqliteLedger

# 1 micro-dollar a token, in and out: a cost equals the tokens it counts.
PRICE = "1,1"


def _harness(tmp_path: Path, backend: str, **budgets: object) -> Harness:
    h = make_turn_harness(tmp_path, backend)
    h.deps.agent = Agent(model_settings={"price": PRICE}, budgets=budgets)
    h.deps.ledger = MemoryLedger() if backend == "memory" else SqliteLedger(str(tmp_path / "l.db"))
    return h


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_round_whose_worst_case_is_over_the_turn_budget_never_runs(
    tmp_path: Path, backend: str
) -> None:
    # The scripted model reserves 1,024 output tokens: its first round's worst case is more
    # than $0.001 whatever the prompt.
    h = _harness(tmp_path, backend, turn_cost="0.001")

    result = run_turn(h.deps, h.session_id, USER, "hello there")

    assert result.status == "failed"
    assert result.error is not None
    assert result.error.startswith("budget_exceeded: the turn's cost budget is $0.001000; ")
    assert "the next model round could reach $0.00" in result.error
    assert "(spent $0.000000)" in result.error
    assert h.provider.requests == []


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_round_that_measures_over_the_budget_fails_the_turn_and_keeps_its_reply(
    tmp_path: Path, backend: str
) -> None:
    # Output at $1,000 / Mtok (1,000 micro-dollars a token), capped at 1 token: the worst case
    # is $0.001, but the scripted model ignores the cap and replies with more tokens.
    h = make_turn_harness(tmp_path, backend)
    h.deps.agent = Agent(
        model_settings={"price": "0,1000", "max_tokens": 1}, budgets={"turn_cost": "0.0015"}
    )

    result = run_turn(h.deps, h.session_id, USER, "hello there, how are you today")

    assert result.status == "failed"
    assert result.error is not None
    assert result.error.startswith(
        "budget_exceeded: the turn's cost budget is $0.001500; it reached $"
    )
    assert result.usage.cost_micros > 1_500
    assert f"it reached ${result.usage.cost_micros / 1_000_000:.6f} " in result.error
    transcript = h.transcript()
    assert [m.role for m in transcript] == ["user", "assistant"]
    assert transcript[-1].text  # the reply the round paid for is kept


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_turn_token_budget_counts_input_and_output_tokens(tmp_path: Path, backend: str) -> None:
    h = _harness(tmp_path, backend, turn_tokens=50)

    result = run_turn(h.deps, h.session_id, USER, "hello there")

    assert result.status == "failed"
    assert result.error is not None
    assert result.error.startswith("budget_exceeded: the turn's token budget is 50 tokens; ")


def _turns_until_refused(h: Harness, session_ids: list[str], most: int = 20) -> list[TurnResult]:
    """Turns round-robin over `session_ids` until one fails (at most `most`)."""
    results: list[TurnResult] = []
    for number in range(most):
        results.append(run_turn(h.deps, session_ids[number % len(session_ids)], USER, "hi there"))
        if results[-1].status != "completed":
            break
    return results


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_session_budget_counts_every_turn_of_the_session(tmp_path: Path, backend: str) -> None:
    h = _harness(tmp_path, backend, session_cost="0.003")

    results = _turns_until_refused(h, [h.session_id])

    *completed, refused = results
    assert len(completed) >= 2
    assert refused.status == "failed"
    assert refused.error is not None
    assert refused.error.startswith("budget_exceeded: the session's cost budget is $0.003000; ")
    with h.storage() as storage:
        spent = storage.get_stats().cost_micros
    assert spent == sum(r.usage.cost_micros for r in completed)
    assert f"(spent ${spent / 1_000_000:.6f})" in refused.error
    assert spent <= 3_000


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_users_daily_budget_counts_all_their_sessions_through_the_ledger(
    tmp_path: Path, backend: str
) -> None:
    h = _harness(tmp_path, backend, user_daily_cost="0.003")
    other = f"{h.session_id}-b"
    h.envelopes.create(other, USER)

    *completed, refused = _turns_until_refused(h, [h.session_id, other])

    assert len(completed) >= 2  # in both sessions
    assert refused.status == "failed"
    assert refused.error is not None
    assert "your daily cost budget (UTC day) is $0.003000" in refused.error
    assert h.deps.ledger is not None
    totals = h.deps.ledger.day_totals(USER, utc_day(h.clock()))
    assert totals.user_micros == sum(r.usage.cost_micros for r in [*completed, refused])
    # A daily budget is a shared counter: the round that reached it is the whole overrun (each
    # of these turns is one round).
    assert totals.user_micros >= 3_000
    assert totals.user_micros - 3_000 < max(r.usage.cost_micros for r in completed)
    lines = h.deps.ledger.usage_lines(USER, utc_day(h.clock()), utc_day(h.clock()))
    assert {line.session_id for line in lines} == {h.session_id, other}


def test_budgets_of_the_agent_and_the_deployment_combine_the_lower_of_each() -> None:
    agent = Budgets(turn_cost="1", session_cost="5")
    deployment = Budgets(turn_cost="0.5", user_daily_cost="10")

    assert agent.tighter(deployment) == Budgets(
        turn_cost="0.5", session_cost="5", user_daily_cost="10"
    )


def test_a_cost_budget_with_more_than_six_decimals_is_refused_naming_the_agent() -> None:
    with pytest.raises(ValueError, match=r"agent 'agent': budgets.turn_cost: .*6 decimals"):
        Agent(budgets={"turn_cost": "0.0000001"})
