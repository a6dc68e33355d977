"""`GET /usage?from=&to=`: the caller's own spend by UTC day, session and model, from the
ledger; bad days are a 400 naming the parameter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.api_client import ApiHarness, auth, make_api_harness
from turnkeep import Agent
from turnkeep.providers.base import Usage
from turnkeep.spend.ledger import Charge, utc_day


@pytest.fixture
def priced_api() -> Iterator[ApiHarness]:
    for api in make_api_harness():
        api.runtime.deps.agent = Agent(model_settings={"price": "1,2"})
        yield api


def test_usage_sums_the_callers_turns_by_day_session_and_model(priced_api: ApiHarness) -> None:
    first, second = priced_api.session(), priced_api.session()
    turns = [priced_api.start(first, "hello there"), priced_api.start(second, "hi")]
    turns.append(priced_api.start(first, 'call echo {"text": "x"}'))
    views = [
        priced_api.client.get(f"/sessions/{sid}/turns/{t}", headers=auth()).json()
        for sid, t in zip([first, second, first], turns, strict=True)
    ]
    ledger = priced_api.runtime.deps.ledger
    assert ledger is not None
    today = utc_day(priced_api.runtime.deps.clock())
    ledger.charge(
        Charge("other-user", "someone-else", "s-x", "scripted", today, Usage(9, 9, cost_micros=99))
    )

    report = priced_api.client.get("/usage", headers=auth()).json()

    cost = sum(v["usage"]["cost_micros"] for v in views)
    assert cost > 0
    assert report["from"] == report["to"] == today
    assert report["total"]["cost_micros"] == cost
    assert report["total"]["rounds"] == 4
    assert report["total"]["input_tokens"] == sum(v["usage"]["input_tokens"] for v in views)
    assert [d["day"] for d in report["by_day"]] == [today]
    by_session = {s["session_id"]: s for s in report["by_session"]}
    assert set(by_session) == {first, second}
    assert by_session[second]["cost_micros"] == views[1]["usage"]["cost_micros"]
    assert [m["model"] for m in report["by_model"]] == ["scripted"]


def test_usage_of_days_without_rounds_is_zero(priced_api: ApiHarness) -> None:
    report = priced_api.client.get(
        "/usage", params={"from": "2020-01-01", "to": "2020-01-31"}, headers=auth()
    ).json()

    assert report["total"]["cost_micros"] == 0
    assert report["by_day"] == report["by_session"] == report["by_model"] == []


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"from": "yesterday"}, "from", "from must be a UTC day YYYY-MM-DD, got 'yesterday'"),
        ({"to": "2026-13-01"}, "to", "to must be a UTC day"),
        ({"from": "2026-02-02", "to": "2026-02-01"}, "from", "from 2026-02-02 is after to"),
        ({"from": "2020-01-01", "to": "2026-01-01"}, "from", "spans more than 366 days"),
    ],
)
def test_a_bad_usage_range_is_a_400_naming_the_parameter(
    priced_api: ApiHarness, params: dict[str, str], field: str, message: str
) -> None:
    answer = priced_api.client.get("/usage", params=params, headers=auth())

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["field"] == field
    assert message in error["message"]
