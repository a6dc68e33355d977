"""The spend ledger: every priced round charged once to its user's UTC day, its session and its
model, with the per-user and per-deployment day totals the daily budgets read (docs/usage.md,
"The ledger"). Backends: memory (here), SQLite (`ledger_sqlite`), DynamoDB (`ledger_dynamodb`).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Final

from turnkeep.providers.base import Usage

DAY_FORMAT: Final = "%Y-%m-%d"


def utc_day(epoch_seconds: float) -> str:
    """The UTC day (`YYYY-MM-DD`) a moment falls on: the daily budgets' unit."""
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime(DAY_FORMAT)


def next_day_start(epoch_seconds: float) -> float:
    """When the UTC day of `epoch_seconds` ends (a daily budget's reset time)."""
    start = datetime.fromtimestamp(epoch_seconds, UTC).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    return (start + timedelta(days=1)).timestamp()


@dataclass(frozen=True, slots=True)
class Charge:
    """One priced model call: `key` (the turn and round, unique) makes charging idempotent."""

    key: str
    user_id: str
    session_id: str
    model: str
    day: str
    usage: Usage


@dataclass(frozen=True, slots=True)
class UsageLine:
    """What one user spent on one UTC day in one session on one model."""

    day: str
    session_id: str
    model: str
    rounds: int
    usage: Usage


@dataclass(frozen=True, slots=True)
class DayTotals:
    """The micro-dollars charged on one UTC day: to one user, and to the whole deployment."""

    user_micros: int = 0
    deployment_micros: int = 0


class SpendLedger(ABC):
    """Charges and totals; every method is safe to call from many threads and processes at
    once (the backends' counters are atomic)."""

    @abstractmethod
    def charge(self, charge: Charge) -> bool:
        """Add the charge to its day's totals and its usage line, atomically; False (and no
        change) when its key was charged before (a redelivered step)."""

    @abstractmethod
    def day_totals(self, user_id: str, day: str) -> DayTotals:
        """The user's and the deployment's totals of `day`."""

    @abstractmethod
    def usage_lines(self, user_id: str, first_day: str, last_day: str) -> list[UsageLine]:
        """The user's lines of the days `first_day`..`last_day` (inclusive), ordered by day,
        session and model."""

    def close(self) -> None:  # noqa: B027  # optional: only the SQLite ledger holds a connection
        """Release connections."""


def _added(line: UsageLine | None, charge: Charge) -> UsageLine:
    if line is None:
        return UsageLine(charge.day, charge.session_id, charge.model, 1, charge.usage)
    return replace(line, rounds=line.rounds + 1, usage=line.usage + charge.usage)


class MemoryLedger(SpendLedger):
    """In-process ledger (tests, `memory://` deployments); one lock makes it atomic."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: set[str] = set()
        self._lines: dict[tuple[str, str, str, str], UsageLine] = {}
        self._users: dict[tuple[str, str], int] = {}
        self._days: dict[str, int] = {}

    def charge(self, charge: Charge) -> bool:
        with self._lock:
            if charge.key in self._keys:
                return False
            self._keys.add(charge.key)
            where = (charge.user_id, charge.day, charge.session_id, charge.model)
            self._lines[where] = _added(self._lines.get(where), charge)
            user_day = (charge.user_id, charge.day)
            cost = charge.usage.cost_micros
            self._users[user_day] = self._users.get(user_day, 0) + cost
            self._days[charge.day] = self._days.get(charge.day, 0) + cost
            return True

    def day_totals(self, user_id: str, day: str) -> DayTotals:
        with self._lock:
            return DayTotals(self._users.get((user_id, day), 0), self._days.get(day, 0))

    def usage_lines(self, user_id: str, first_day: str, last_day: str) -> list[UsageLine]:
        with self._lock:
            return [
                line
                for (user, day, _, _), line in sorted(self._lines.items())
                if user == user_id and first_day <= day <= last_day
            ]


_MEMORY: dict[str, MemoryLedger] = {}
_MEMORY_LOCK = threading.Lock()


def memory_ledger(name: str) -> MemoryLedger:
    """The process's memory ledger of `name` (shared like `memory://name` envelope stores)."""
    with _MEMORY_LOCK:
        return _MEMORY.setdefault(name, MemoryLedger())
