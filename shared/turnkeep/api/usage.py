"""`GET /usage?from=&to=`: what the caller spent, by UTC day, session and model (tokens, cache
reads and writes, cost in micro-dollars), from the spend ledger (docs/api.md, "Usage";
docs/usage.md)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Final

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from turnkeep.api.context import Ctx, User
from turnkeep.api.errors import ApiError
from turnkeep.api.models import error_responses
from turnkeep.spend.report import usage_report

router = APIRouter(tags=["usage"], responses=error_responses(400, 401, 405, 422, 503))

MAX_DAYS: Final = 366


class UsageFigures(BaseModel):
    """Tokens, cache tokens and cost of some rounds."""

    rounds: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_micros: int = Field(description="integer micro-dollars (1 USD = 1,000,000)")
    estimated: bool = Field(description="some counts are the provider's estimate")


class DayUsage(UsageFigures):
    day: str = Field(description="UTC day, YYYY-MM-DD")


class SessionUsage(UsageFigures):
    session_id: str


class ModelUsage(UsageFigures):
    model: str


class UsageReport(BaseModel):
    """The caller's own usage over the UTC days `from`..`to` (inclusive)."""

    from_day: str = Field(alias="from")
    to_day: str = Field(alias="to")
    total: UsageFigures
    by_day: list[DayUsage]
    by_session: list[SessionUsage]
    by_model: list[ModelUsage]


def _day(text: str | None, name: str, default: date) -> date:
    if text is None or text == "":
        return default
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ApiError(
            400, "bad_request", f"{name} must be a UTC day YYYY-MM-DD, got {text!r}", field=name
        ) from None


@router.get("/usage", response_model=UsageReport, response_model_by_alias=True)
def get_usage(
    ctx: Ctx,
    user: User,
    from_: Annotated[str | None, Query(alias="from")] = None,
    to: str | None = None,
) -> UsageReport:
    """The caller's usage by day, session and model; `from` and `to` default to today (UTC)
    and span at most 366 days."""
    today = datetime.fromtimestamp(ctx.now_ms() / 1000, UTC).date()
    last = _day(to, "to", today)
    first = _day(from_, "from", last)
    if first > last:
        raise ApiError(400, "bad_request", f"from {first} is after to {last}", field="from")
    if last - first >= timedelta(days=MAX_DAYS):
        raise ApiError(
            400, "bad_request", f"from..to spans more than {MAX_DAYS} days", field="from"
        )
    ledger = ctx.runtime.deps.ledger
    lines = [] if ledger is None else ledger.usage_lines(user, first.isoformat(), last.isoformat())
    return UsageReport.model_validate(usage_report(lines, first.isoformat(), last.isoformat()))
