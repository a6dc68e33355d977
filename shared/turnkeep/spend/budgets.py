"""Budgets: how much a turn, a session, a user per UTC day and the deployment per UTC day may
spend, and the checks before and after a model round (docs/usage.md, "Budgets")."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from turnkeep.providers.base import Usage

BUDGET_EXCEEDED: Final = "budget_exceeded"


def _micros(value: Decimal | None) -> int | None:
    return None if value is None else int(value * 1_000_000)


def dollars(micros: int) -> str:
    """Micro-dollars as a dollar figure with every digit (`$0.012500`)."""
    return f"${Decimal(micros) / 1_000_000:.6f}"


class Budgets(BaseModel):
    """Each budget optional; costs in dollars (at most 6 decimals), tokens count the input and
    output tokens of the turn's rounds (cache reads and writes included in input)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_tokens: int | None = Field(default=None, ge=1)
    turn_cost: Decimal | None = Field(default=None, gt=0)
    session_cost: Decimal | None = Field(default=None, gt=0)
    user_daily_cost: Decimal | None = Field(default=None, gt=0)
    deployment_daily_cost: Decimal | None = Field(default=None, gt=0)

    @field_validator("turn_cost", "session_cost", "user_daily_cost", "deployment_daily_cost")
    @classmethod
    def _whole_micro_dollars(cls, value: Decimal | None) -> Decimal | None:
        if value is not None and (value * 1_000_000) % 1:
            raise ValueError("a cost budget has at most 6 decimals (whole micro-dollars)")
        return value

    @property
    def empty(self) -> bool:
        """No budget is set (nothing to check, no counter to read)."""
        return all(getattr(self, name) is None for name in type(self).model_fields)

    @property
    def daily(self) -> bool:
        """A per-day budget is set (the ledger's counters are read before each round)."""
        return self.user_daily_cost is not None or self.deployment_daily_cost is not None

    def tighter(self, other: Budgets | None) -> Budgets:
        """Each budget the lower of the two (an unset one does not loosen the other)."""
        if other is None:
            return self
        merged: dict[str, Any] = {}
        for name in type(self).model_fields:
            mine, theirs = getattr(self, name), getattr(other, name)
            merged[name] = theirs if mine is None else mine if theirs is None else min(mine, theirs)
        return Budgets(**merged)


def budgets_of(value: Budgets | dict[str, Any] | None) -> Budgets | None:
    """An agent's or a deployment's `budgets` argument as Budgets (None: none set)."""
    if value is None or isinstance(value, Budgets):
        return value
    return Budgets.model_validate(value)


@dataclass(frozen=True, slots=True)
class Spent:
    """What is already spent where a budget applies (micro-dollars; tokens of the turn)."""

    turn: Usage
    session_micros: int = 0
    user_day_micros: int = 0
    deployment_day_micros: int = 0


def turn_tokens(usage: Usage) -> int:
    """The tokens a turn token budget counts."""
    return (
        usage.input_tokens
        + usage.cache_read_tokens
        + usage.cache_write_tokens
        + usage.output_tokens
    )


def over_budget(budgets: Budgets, spent: Spent, next_round: Usage | None = None) -> str | None:
    """The `budget_exceeded: ...` error when a budget does not allow the next round (its worst
    case `next_round`), or when `spent` is over one (`next_round` None: after a round, checking
    what was measured); None when it fits.

    The turn and session budgets are the turn's own: before a round, `spent + worst > budget`
    fails. The daily budgets are counters many turns share: before a round, `spent >= budget`
    fails, and each round charges what it measured, so concurrent turns overrun a daily budget
    by at most the rounds in flight when it was reached (docs/usage.md, "Budgets").
    """
    extra = next_round or Usage()
    when = "the next model round could reach" if next_round is not None else "it reached"
    tokens = turn_tokens(spent.turn) + turn_tokens(extra)
    if budgets.turn_tokens is not None and tokens > budgets.turn_tokens:
        return (
            f"{BUDGET_EXCEEDED}: the turn's token budget is {budgets.turn_tokens} tokens; "
            f"{when} {tokens} (spent {turn_tokens(spent.turn)})"
        )
    cost = extra.cost_micros
    for label, limit, already in (
        ("the turn's cost budget", budgets.turn_cost, spent.turn.cost_micros),
        ("the session's cost budget", budgets.session_cost, spent.session_micros),
    ):
        limit_micros = _micros(limit)
        if limit_micros is not None and already + cost > limit_micros:
            return (
                f"{BUDGET_EXCEEDED}: {label} is {dollars(limit_micros)}; {when} "
                f"{dollars(already + cost)} (spent {dollars(already)})"
            )
    for label, limit, already in (
        ("your daily cost budget (UTC day)", budgets.user_daily_cost, spent.user_day_micros),
        (
            "the deployment's daily cost budget (UTC day)",
            budgets.deployment_daily_cost,
            spent.deployment_day_micros,
        ),
    ):
        limit_micros = _micros(limit)
        if limit_micros is not None and already >= limit_micros:
            spent_text = dollars(already)
            return f"{BUDGET_EXCEEDED}: {label} is {dollars(limit_micros)}; {spent_text} is spent"
    return None
