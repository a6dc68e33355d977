"""The budget checks around a model round and the ledger charge after it (docs/usage.md,
"Budgets"): before a round against its worst case (the input estimate plus the output cap,
priced), after it against what was measured. Each returns the `budget_exceeded: ...` error
that fails the turn, or None."""

from __future__ import annotations

from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.state import OperationState
from turnkeep.providers.base import ModelProvider, ModelRequest, Usage
from turnkeep.providers.settings import ModelSettings
from turnkeep.spend.budgets import Budgets, Spent, over_budget
from turnkeep.spend.ledger import Charge, DayTotals, utc_day
from turnkeep.spend.pricing import price_for, priced
from turnkeep.storage import Storage


def turn_budgets(deps: HarnessDeps) -> Budgets | None:
    """The agent's budgets with the deployment's over them (the lower of each wins)."""
    mine = deps.agent.budgets
    merged = mine.tighter(deps.budgets) if mine is not None else deps.budgets
    return None if merged is None or merged.empty else merged


def _spent(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    budgets: Budgets,
    *,
    daily: bool = True,
) -> Spent:
    session = storage.get_stats().cost_micros if budgets.session_cost is not None else 0
    days = DayTotals()
    if daily and budgets.daily and deps.ledger is not None:
        days = deps.ledger.day_totals(state.user_id, utc_day(deps.clock()))
    return Spent(state.usage, session, days.user_micros, days.deployment_micros)


def worst_case(
    provider: ModelProvider,
    request: ModelRequest,
    settings: ModelSettings | None,
    input_estimate: int,
) -> Usage:
    """A round's most: its estimated input and its full output cap, at the round's price."""
    spec = getattr(provider, "settings", None)
    base = spec if isinstance(spec, ModelSettings) else ModelSettings()
    cap = request.settings_over(base).max_tokens or getattr(provider, "max_tokens", None)
    output = cap if isinstance(cap, int) and cap > 0 else provider.context.output_reserve
    return priced(
        Usage(input_tokens=input_estimate, output_tokens=output), price_for(provider, settings)
    )


def check_before_round(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    worst: Usage,
) -> str | None:
    """The error when the round's worst case would take the turn over a budget."""
    budgets = turn_budgets(deps)
    if budgets is None:
        return None
    return over_budget(budgets, _spent(deps, storage, state, budgets), worst)


def charge_round(
    deps: HarnessDeps, state: OperationState, key: str, usage: Usage, model: str
) -> None:
    """Charge a settled round (or compaction) to the ledger once (a redelivery is a no-op)."""
    if deps.ledger is None or not (usage.input_tokens or usage.output_tokens):
        return
    day = utc_day(deps.clock())
    charge = Charge(key, state.user_id, state.session_id, model, day, usage)
    if deps.ledger.charge(charge) and deps.on_charge is not None:
        deps.on_charge(charge)


def check_after_round(deps: HarnessDeps, storage: Storage, settled: OperationState) -> str | None:
    """The error when what the turn measured so far (`settled`: the state after the round)
    is over its turn or session budget. The daily counters are not read again here: the next
    round's check (or the next turn's start) reads them, which saves a request a round."""
    budgets = turn_budgets(deps)
    if budgets is None:
        return None
    return over_budget(budgets, _spent(deps, storage, settled, budgets, daily=False))
