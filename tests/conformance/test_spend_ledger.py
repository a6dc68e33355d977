"""Conformance: every spend ledger backend (memory, SQLite, DynamoDB on moto) charges a round
once per key, keeps the user's and the deployment's day totals and the usage lines, and loses
no increment when many threads charge at once (docs/usage.md, "The ledger").

moto answers one request at a time here (`SerializedClient`): its server is not thread-safe (two
racing conditional transactions can both succeed there), while DynamoDB runs each transaction
serializably, which one request at a time models; the threads still race between requests."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.spend_ledgers import open_test_ledger
from turnkeep.providers.base import Usage
from turnkeep.spend.ledger import Charge, DayTotals, SpendLedger

DAY = "2026-12-02"


@pytest.fixture(params=["memory", "sqlite", "dynamodb"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SpendLedger]:
    with open_test_ledger(request.param, tmp_path) as made:
        yield made


def _charge(key: str, cost: int, *, user: str = "u1", day: str = DAY, **where: str) -> Charge:
    usage = Usage(input_tokens=cost * 2, output_tokens=cost, cache_read_tokens=1, cost_micros=cost)
    return Charge(key, user, where.get("session", "s1"), where.get("model", "m#1"), day, usage)


def test_a_charge_counts_once_per_key(ledger: SpendLedger) -> None:
    assert ledger.charge(_charge("op-1:r0", 100)) is True
    assert ledger.charge(_charge("op-1:r0", 100)) is False

    assert ledger.day_totals("u1", DAY) == DayTotals(100, 100)


def test_day_totals_split_the_user_from_the_deployment(ledger: SpendLedger) -> None:
    ledger.charge(_charge("a", 100))
    ledger.charge(_charge("b", 30, user="u2"))
    ledger.charge(_charge("c", 7, day="2026-12-01"))

    assert ledger.day_totals("u1", DAY) == DayTotals(100, 130)
    assert ledger.day_totals("u2", DAY) == DayTotals(30, 130)
    assert ledger.day_totals("u3", DAY) == DayTotals(0, 130)
    assert ledger.day_totals("u1", "2026-12-01") == DayTotals(7, 7)


def test_usage_lines_sum_a_users_rounds_by_day_session_and_model(ledger: SpendLedger) -> None:
    ledger.charge(_charge("a", 10))
    ledger.charge(_charge("b", 20))
    ledger.charge(_charge("c", 5, session="s2", model="amazon.nova-lite-v1:0"))
    ledger.charge(_charge("d", 1, day="2026-11-30"))
    ledger.charge(_charge("e", 9, user="u2"))

    lines = ledger.usage_lines("u1", "2026-12-01", DAY)

    assert [(line.day, line.session_id, line.model, line.rounds) for line in lines] == [
        (DAY, "s1", "m#1", 2),
        (DAY, "s2", "amazon.nova-lite-v1:0", 1),
    ]
    assert lines[0].usage == Usage(60, 30, 2, 0, False, 30)
    assert [line.day for line in ledger.usage_lines("u1", "2026-11-30", "2026-11-30")] == [
        "2026-11-30"
    ]


def test_many_threads_charging_at_once_lose_no_increment(ledger: SpendLedger) -> None:
    charges = [_charge(f"op-{n}:r0", n + 1, session=f"s{n % 3}") for n in range(40)]
    # Each key twice: the redeliveries must not count.
    with ThreadPoolExecutor(max_workers=20) as pool:
        counted = list(pool.map(ledger.charge, charges + charges))

    assert counted.count(True) == 40
    expected = sum(range(1, 41))
    assert ledger.day_totals("u1", DAY) == DayTotals(expected, expected)
    assert sum(line.rounds for line in ledger.usage_lines("u1", DAY, DAY)) == 40
