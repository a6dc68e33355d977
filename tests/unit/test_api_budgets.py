"""The daily budgets at the API: a turn start by a user already at their daily budget (or a
deployment at its own) is a 429 naming the budget, the figures and the reset time; a turn
stopped by a budget shows `failed` with its `budget_exceeded` error and its cost."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.api_client import ApiHarness, auth, make_api_harness
from turnkeep import Agent
from turnkeep.api import ApiSettings
from turnkeep.runtime.settings import TurnkeepSettings


def _api(**budgets: str) -> Iterator[ApiHarness]:
    def settings(name: str) -> TurnkeepSettings:
        return TurnkeepSettings(
            storage_url=f"memory://{name}",
            envelope_url=f"memory://{name}",
            frame_interval_ms=0,
            **budgets,  # type: ignore[arg-type]
        )

    for api in make_api_harness(turnkeep=settings, settings=ApiSettings(turn_start_limit=1_000)):
        # 1 micro-dollar a token: a turn of the scripted model costs some hundreds.
        api.runtime.deps.agent = Agent(model_settings={"price": "1,1"})
        yield api


@pytest.fixture
def daily_api() -> Iterator[ApiHarness]:
    yield from _api(budget_user_daily_cost="0.002")


def _start(
    api: ApiHarness, sid: str, text: str = "hi there"
) -> tuple[int, dict[str, object], dict[str, str]]:
    answer = api.client.post(f"/sessions/{sid}/turns", json={"text": text}, headers=auth())
    return answer.status_code, answer.json(), dict(answer.headers)


def test_a_user_at_their_daily_budget_gets_429_with_the_reset_time(daily_api: ApiHarness) -> None:
    sid = daily_api.session()
    answers = [_start(daily_api, sid) for _ in range(12)]

    codes = [code for code, _, _ in answers]
    assert 202 in codes
    assert 429 in codes
    _, body, headers = answers[codes.index(429)]
    error = body["error"]
    assert isinstance(error, dict)
    assert error["code"] == "budget_exceeded"
    assert str(error["message"]).startswith("your daily cost budget of $0.002000 is spent ($0.002")
    assert "resets at " in str(error["message"])
    assert headers["x-budget-reset"].endswith("T00:00:00Z")
    assert 1 <= int(headers["retry-after"]) <= 86_400


def test_a_turn_stopped_by_its_budget_shows_failed_with_the_budget_error_and_its_cost(
    daily_api: ApiHarness,
) -> None:
    sid = daily_api.session()
    views = []
    for _ in range(12):
        # Two rounds: the first may reach the budget, which the second's check then sees.
        code, body, _ = _start(daily_api, sid, 'call echo {"text": "x"}')
        if code != 202:
            break
        views.append(
            daily_api.client.get(f"/sessions/{sid}/turns/{body['turn_id']}", headers=auth()).json()
        )

    assert views[0]["status"] == "completed"
    assert views[0]["usage"]["cost_micros"] > 0
    stopped = [v for v in views if v["status"] == "failed"]
    assert stopped, [v["status"] for v in views]
    assert stopped[0]["error"].startswith("budget_exceeded: your daily cost budget (UTC day)")
    assert stopped[0]["usage"]["cost_micros"] > 0  # it spent a round, then stopped


def test_the_deployments_daily_budget_refuses_every_users_turn_once_spent() -> None:
    for api in _api(budget_deployment_daily_cost="0.000001"):
        assert _start(api, api.session())[0] == 202  # nothing spent yet
        code, body, _ = _start(api, api.session())
        assert code == 429
        error = body["error"]
        assert isinstance(error, dict)
        assert str(error["message"]).startswith(
            "the deployment's daily cost budget of $0.000001 is spent ($0.000"
        )
