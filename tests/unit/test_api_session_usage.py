"""A session's view carries its usage totals over all its turns (docs/api.md, GET
/sessions/{id}; docs/usage.md, "Seeing it"): the sum of its turns' tokens and cost, from the
session storage's stats, on the memory, JSONL and SQLite backends; null in the session list."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api_client import ApiHarness, auth, make_api_harness
from turnkeep.providers.factory import provider_from_config
from turnkeep.runtime.settings import TurnkeepSettings

URLS = {
    "memory": lambda tmp: "memory://session-usage",
    "jsonl": lambda tmp: f"jsonl://{tmp / 'data'}",
    "sqlite": lambda tmp: f"sqlite:///{tmp / 'turnkeep.db'}",
}


@pytest.fixture(params=sorted(URLS))
def priced_api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ApiHarness]:
    url = URLS[request.param](tmp_path)
    yield from make_api_harness(
        provider=provider_from_config("scripted?price=1,1"),  # 1 micro-dollar a token
        turnkeep=lambda _name: TurnkeepSettings(
            storage_url=url, envelope_url=f"sqlite:///{tmp_path / 'envelopes.db'}"
        ),
    )


def test_a_sessions_view_sums_the_tokens_and_cost_of_all_its_turns(
    priced_api: ApiHarness,
) -> None:
    sid = priced_api.session()
    turns = [priced_api.start(sid, text) for text in ("hello there", "and what does it cost?")]
    usages = [
        priced_api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()["usage"]
        for turn in turns
    ]

    view = priced_api.client.get(f"/sessions/{sid}", headers=auth()).json()

    assert all(usage["cost_micros"] > 0 for usage in usages)
    assert view["usage"]["cost_micros"] == sum(u["cost_micros"] for u in usages)
    assert view["usage"]["input_tokens"] == sum(u["input_tokens"] for u in usages)
    assert view["usage"]["output_tokens"] == sum(u["output_tokens"] for u in usages)


def test_a_session_without_turns_has_zero_totals_and_the_list_carries_none(
    priced_api: ApiHarness,
) -> None:
    sid = priced_api.session()

    view = priced_api.client.get(f"/sessions/{sid}", headers=auth()).json()
    listed = priced_api.client.get("/sessions", headers=auth()).json()["sessions"]

    assert view["usage"] == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost_micros": 0,
    }
    assert [s["usage"] for s in listed] == [None]
