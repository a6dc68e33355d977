"""The daily budgets at a turn's start: a user (or the deployment) who spent their daily budget
gets a 429 naming the budget, the figures and when it resets (docs/usage.md, "Budgets")."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from turnkeep.api.errors import ApiError
from turnkeep.harness import HarnessDeps
from turnkeep.harness.spend_gate import turn_budgets
from turnkeep.spend.budgets import BUDGET_EXCEEDED, dollars
from turnkeep.spend.ledger import next_day_start, utc_day


def refuse_over_daily_budget(deps: HarnessDeps, user_id: str, now_s: float) -> None:
    """Raise the 429 when `user_id`'s or the deployment's spend today is at its budget."""
    budgets = turn_budgets(deps)
    if budgets is None or not budgets.daily or deps.ledger is None:
        return
    totals = deps.ledger.day_totals(user_id, utc_day(now_s))
    for label, limit, spent in (
        ("your daily cost budget", budgets.user_daily_cost, totals.user_micros),
        (
            "the deployment's daily cost budget",
            budgets.deployment_daily_cost,
            totals.deployment_micros,
        ),
    ):
        if limit is None or spent < int(limit * 1_000_000):
            continue
        reset = next_day_start(now_s)
        at = datetime.fromtimestamp(reset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        raise ApiError(
            429,
            BUDGET_EXCEEDED,
            f"{label} of {dollars(int(limit * 1_000_000))} is spent ({dollars(spent)} today); "
            f"it resets at {at}",
            headers={"Retry-After": str(max(1, math.ceil(reset - now_s))), "X-Budget-Reset": at},
        )
