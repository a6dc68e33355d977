"""A user's usage lines as the report `GET /usage` answers and `turnkeep usage` prints: the
total and the sums by UTC day, session and model (docs/api.md, "Routes")."""

from __future__ import annotations

from typing import Any

from turnkeep.providers.base import Usage
from turnkeep.spend.ledger import UsageLine


def figures(lines: list[UsageLine]) -> dict[str, Any]:
    """Rounds, tokens, cache tokens and cost (micro-dollars) of `lines` together."""
    usage = sum((line.usage for line in lines), Usage())
    return {
        "rounds": sum(line.rounds for line in lines),
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cost_micros": usage.cost_micros,
        "estimated": usage.estimated,
    }


def _grouped(lines: list[UsageLine], key: str) -> list[dict[str, Any]]:
    groups: dict[str, list[UsageLine]] = {}
    for line in lines:
        groups.setdefault(getattr(line, key), []).append(line)
    return [{key: name, **figures(group)} for name, group in sorted(groups.items())]


def usage_report(lines: list[UsageLine], first_day: str, last_day: str) -> dict[str, Any]:
    """`{from, to, total, by_day, by_session, by_model}` of the days `first_day`..`last_day`."""
    return {
        "from": first_day,
        "to": last_day,
        "total": figures(lines),
        "by_day": _grouped(lines, "day"),
        "by_session": _grouped(lines, "session_id"),
        "by_model": _grouped(lines, "model"),
    }
