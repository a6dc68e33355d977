"""Deployment budgets come from TURNKEEP_BUDGET_* (template parameters, empty = none), and the
template passes each budget parameter to every function."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.support.aws_template import load_template
from turnkeep.runtime.settings import TurnkeepSettings
from turnkeep.spend.budgets import Budgets

BUDGET_VARIABLES = {
    "TURNKEEP_BUDGET_TURN_TOKENS": "BudgetTurnTokens",
    "TURNKEEP_BUDGET_TURN_COST": "BudgetTurnCost",
    "TURNKEEP_BUDGET_SESSION_COST": "BudgetSessionCost",
    "TURNKEEP_BUDGET_USER_DAILY_COST": "BudgetUserDailyCost",
    "TURNKEEP_BUDGET_DEPLOYMENT_DAILY_COST": "BudgetDeploymentDailyCost",
}


def test_empty_budget_variables_are_no_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BUDGET_VARIABLES:
        monkeypatch.setenv(name, "")

    assert TurnkeepSettings().budgets() is None


def test_budget_variables_become_the_deployments_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNKEEP_BUDGET_TURN_TOKENS", "50000")
    monkeypatch.setenv("TURNKEEP_BUDGET_USER_DAILY_COST", "2.5")
    monkeypatch.setenv("TURNKEEP_BUDGET_DEPLOYMENT_DAILY_COST", "")

    assert TurnkeepSettings().budgets() == Budgets(
        turn_tokens=50_000, user_daily_cost=Decimal("2.5")
    )


def test_a_malformed_budget_variable_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNKEEP_BUDGET_TURN_COST", "lots")

    with pytest.raises(ValueError, match="budget_turn_cost"):
        TurnkeepSettings()


def test_the_template_passes_every_budget_parameter_to_the_functions() -> None:
    template = load_template()
    variables = template["Globals"]["Function"]["Environment"]["Variables"]

    for variable, parameter in BUDGET_VARIABLES.items():
        assert variables[variable] == {"Ref": parameter}
        assert template["Parameters"][parameter]["Default"] == ""
