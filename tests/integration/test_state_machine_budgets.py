"""Budgets through the turn state machine of template.yaml under moto (docs/usage.md,
"Budgets"): the deployment's budgets (TURNKEEP_BUDGET_*, as the template passes its parameters)
stop a turn run by the real step handlers, which ends `failed` with `budget_exceeded: ...` and
its text so far kept; a user past their daily budget is refused the next start with a 429 by
the API Lambda; and the session view of the API Lambda sums its turns' costs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.state_machine import (
    SESSION,
    Deployed,
    api_caller,
    assert_ended,
    deploy,
    finished_execution,
    run_turn,
)
from turnkeep.aws_lambda import container
from turnkeep.harness.state import load_head
from turnkeep.harness.transcript import branch_messages


@pytest.fixture
def budgeted(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Deployed]:
    """The stack with `request.param` as function environment: deployment budgets by their
    name (`turn_tokens` is TURNKEEP_BUDGET_TURN_TOKENS), other variables by their own."""
    env = {
        key if key.startswith("TURNKEEP_") else f"TURNKEEP_BUDGET_{key.upper()}": value
        for key, value in request.param.items()
    }
    with deploy(monkeypatch, "STANDARD", **env) as stack:
        yield stack
    container.reset_runtime()  # the next test's runtime is built from its own environment


@pytest.mark.parametrize("budgeted", [{"turn_tokens": "50"}], indirect=True)
def test_a_turn_over_its_token_budget_fails_budget_exceeded_through_the_state_machine(
    budgeted: Deployed,
) -> None:
    op_id, output = run_turn(budgeted, "sfn-budget-tokens", "hello there")

    assert output["status"] == "failed"
    assert output["error"].startswith("budget_exceeded: the turn's token budget is 50 tokens; ")
    assert_ended(budgeted, "sfn-budget-tokens", op_id, "failed")
    steps = [name for name, _event, _error in budgeted.host.calls]
    assert steps[-1] == "FailTurnFunction"


@pytest.mark.parametrize("budgeted", [{"turn_cost": "0.0015"}], indirect=True)
def test_a_round_measured_over_the_cost_budget_fails_the_turn_and_keeps_its_text(
    budgeted: Deployed,
) -> None:
    # Output at $1,000 / Mtok with a 1-token output reserve: the worst case ($0.001) passes the
    # check before the round; the scripted model replies longer, so the measured cost goes over.
    session = "sfn-budget-cost"
    op_id, output = run_turn(
        budgeted,
        session,
        "hello there, how are you today",
        model="scripted?price=0,1000&reserve=1",
    )

    assert output["status"] == "failed"
    assert output["error"].startswith(
        "budget_exceeded: the turn's cost budget is $0.001500; it reached $"
    )
    assert_ended(budgeted, session, op_id, "failed")
    storage = container.runtime().deps.open_storage(session)
    try:
        messages = branch_messages(storage, load_head(storage))
    finally:
        storage.close()
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[-1].text  # the reply the round paid for is kept


@pytest.mark.parametrize(
    "budgeted",
    [{"user_daily_cost": "0.000001", "TURNKEEP_MODEL": "scripted?price=1,1"}],
    indirect=True,
)
def test_a_user_past_their_daily_budget_is_refused_the_next_start_with_429_by_the_api_lambda(
    budgeted: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = api_caller(budgeted, monkeypatch)
    assert call("POST", "/sessions", {"session_id": SESSION})[0] == 201
    status, started = call("POST", f"/sessions/{SESSION}/turns", {"text": "hello"})
    assert status == 202, started
    finished_execution(budgeted, started["turn_id"])
    first = call("GET", f"/sessions/{SESSION}/turns/{started['turn_id']}", None)[1]
    assert first["status"] == "completed"  # a daily budget is checked at a start; it was unspent
    spent = first["usage"]["cost_micros"]
    assert spent > 1

    status, refused = call("POST", f"/sessions/{SESSION}/turns", {"text": "again"})

    assert status == 429, refused
    assert refused["error"]["code"] == "budget_exceeded"
    assert refused["error"]["message"].startswith("your daily cost budget of $0.000001 is spent ($")
    assert f"(${spent / 1_000_000:.6f} today); it resets at " in refused["error"]["message"]


@pytest.mark.parametrize("budgeted", [{"TURNKEEP_MODEL": "scripted?price=1,1"}], indirect=True)
def test_the_api_lambdas_session_view_sums_its_turns_costs_on_dynamodb_and_s3(
    budgeted: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = api_caller(budgeted, monkeypatch)
    assert call("POST", "/sessions", {"session_id": SESSION})[0] == 201
    costs: list[int] = []
    for text in ("hello", "and again"):
        status, started = call("POST", f"/sessions/{SESSION}/turns", {"text": text})
        assert status == 202, started
        finished_execution(budgeted, started["turn_id"])
        turn = call("GET", f"/sessions/{SESSION}/turns/{started['turn_id']}", None)[1]
        costs.append(turn["usage"]["cost_micros"])

    view = call("GET", f"/sessions/{SESSION}", None)[1]

    assert all(cost > 0 for cost in costs)
    assert view["usage"]["cost_micros"] == sum(costs)
