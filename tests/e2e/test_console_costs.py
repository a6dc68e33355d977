"""The console shows what a turn cost: its status line ends with the cost in dollars from the
turn's integer micro-dollars (docs/usage.md, "Seeing it"), on a server whose model is priced."""

from __future__ import annotations

import pytest

from tests.e2e.test_console_browser import (
    api_client,
    connect,
    last_turn,
    new_session,
    send,
    wait_status,
)
from tests.support.browser import Pages
from tests.support.console import module_server
from tests.support.real_server import RealServer

pytestmark = pytest.mark.slow


# One priced server for the module (1 micro-dollar a token); each test has a user of its own.
server = module_server({"TURNKEEP_MODEL": "scripted?price=1,1"})


def test_a_turns_status_line_shows_its_cost(server: RealServer, browser: Pages) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    connect(page, server, "alice")
    new_session(page, "Costs")

    turn = send(page, "hello there, what does this cost?")
    wait_status(page, "completed", turn)

    client = api_client(server, "alice")
    sid = client.get("/sessions").json()["sessions"][0]["session_id"]
    views = client.get(f"/sessions/{sid}").json()
    micros = views["turn"]["usage"]["cost_micros"]
    assert micros > 0
    status = last_turn(page).locator(".turn-status").inner_text()
    assert status.endswith(f" · ${micros // 1_000_000}.{micros % 1_000_000:06d}"), status


def _dollars(micros: int) -> str:
    return f"${micros // 1_000_000}.{micros % 1_000_000:06d}"


def test_the_session_header_shows_the_sum_of_its_turns_costs_after_each_turn(
    server: RealServer, browser: Pages
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    connect(page, server, "bea")
    new_session(page, "Session costs")
    client = api_client(server, "bea")

    costs: list[int] = []
    for number, text in enumerate(["hello there", "and what did all of this cost?"], 1):
        wait_status(page, "completed", send(page, text))
        sid = client.get("/sessions").json()["sessions"][0]["session_id"]
        view = client.get(f"/sessions/{sid}").json()
        costs.append(view["turn"]["usage"]["cost_micros"])
        assert view["usage"]["cost_micros"] == sum(costs), number
        shown = f"Session cost {_dollars(sum(costs))}"
        page.wait_for_selector(f"#session-cost:text-is('{shown}')", timeout=10_000)

    assert all(cost > 0 for cost in costs)
    # Its turns' own lines still end with their own cost.
    assert last_turn(page).locator(".turn-status").inner_text().endswith(_dollars(costs[-1]))
