"""The console in a real browser (headless Debian chromium against a real server): a long tool
result is folded and expands on demand, and a turn waiting for an approval says so in the
status line and shows the rounds and tokens the API reports, not zeros."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_console_browser import (
    TURN_MS,
    api_client,
    connect,
    last_turn,
    new_session,
    send,
    set_tool_approval,
    wait_status,
)
from tests.support import pantry_tools as pantry
from tests.support.browser import Pages
from tests.support.console import agent_env, module_server
from tests.support.real_server import RealServer

pytestmark = pytest.mark.slow


server = module_server(agent_env("tests.support.pantry_tools:agent"))


def test_a_long_tool_result_is_folded_and_expands_and_folds_on_demand(
    server: RealServer, browser: Pages
) -> None:
    whole = pantry.dump_pantry.function(5)
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    connect(page, server, "fran")
    new_session(page, "pantry")
    turn = send(page, 'call dump_pantry {"kb": 5}\ncall check_stock {"item": "tea"}')
    wait_status(page, "completed", turn)

    long_result, short_result = last_turn(page).locator(".tool-result").all()
    shown = long_result.locator("pre")
    toggle = long_result.locator("button.fold-toggle")
    assert shown.inner_text() == whole[:300] + "…"
    assert toggle.inner_text() == f"Show all ({len(whole):,} characters)"
    assert toggle.get_attribute("aria-expanded") == "false"
    assert short_result.locator("button").count() == 0  # a short one is shown whole
    assert short_result.locator("pre").inner_text() == "tea: qty 0"

    toggle.click()
    assert shown.inner_text() == whole
    assert toggle.get_attribute("aria-expanded") == "true"
    assert toggle.inner_text() == f"Fold ({len(whole):,} characters)"
    toggle.click()
    assert shown.inner_text() == whole[:300] + "…"
    assert errors == []


def test_a_turn_waiting_for_an_approval_says_so_with_the_apis_rounds_and_tokens(
    server: RealServer, browser: Pages
) -> None:
    page = browser.new_page()
    connect(page, server, "gail")
    new_session(page, "gated")
    set_tool_approval(page, "put_away")
    turn = send(page, 'call put_away {"item": "rice", "qty": 2}')
    page.locator("#transcript .approval.pending").wait_for(timeout=TURN_MS)
    waiting = f"#transcript > .turn:nth-child({turn})[data-status=awaiting_approval]"
    page.wait_for_selector(waiting, timeout=TURN_MS)
    page.wait_for_function(
        "() => /^awaiting_approval · 1 round · [1-9]/.test(document.querySelector("
        "'#transcript > .turn:last-child .turn-status').textContent)",
        timeout=TURN_MS,
    )

    line = page.inner_text("#turn-line")
    header = last_turn(page).locator(".turn-status").inner_text()
    sid = page.inner_text("#session-id")
    turn_id = last_turn(page).get_attribute("data-turn")
    with api_client(server, "gail") as client:
        view = client.get(f"/sessions/{sid}/turns/{turn_id}").json()

    assert line == f"Turn {turn_id} is waiting for an approval."
    assert view["status"] == "awaiting_approval"
    assert view["rounds"] == 1
    assert view["usage"]["input_tokens"] > 0
    assert header == (
        f"awaiting_approval · 1 round · {view['usage']['input_tokens']} in / "
        f"{view['usage']['output_tokens']} out tokens"
    )

    page.locator("#transcript .approval.pending button", has_text="Approve").click()
    wait_status(page, "completed", turn)
    assert page.inner_text("#turn-line") == "Ready."


def test_a_field_a_person_moves_to_while_a_new_session_opens_keeps_the_focus_and_their_keys(
    server: RealServer, browser: Pages
) -> None:
    held: list[Any] = []

    def hold(route: Any) -> None:  # Playwright needs a Python function here, not a builtin
        held.append(route)

    page = browser.new_page()
    connect(page, server, "hana")
    # The notes are the last thing a new session loads: held, the side panel is already
    # shown and a person can start typing into it.
    page.route("**/sessions/*/notes", hold)
    page.fill("#new-title", "typing early")
    page.keyboard.press("Enter")
    page.click("#meta-tool-approval")
    page.keyboard.type("put_")
    for _ in range(500):  # the route handler runs while Playwright dispatches
        if held:
            break
        page.wait_for_timeout(20)
    assert held, "the notes request was not held"
    for route in held:
        route.continue_()
    page.unroute("**/sessions/*/notes")
    page.wait_for_selector("#notes-size:not(:empty)")
    page.evaluate("() => new Promise((done) => setTimeout(done, 0))")  # the open settles
    page.keyboard.type("away")

    assert page.input_value("#meta-tool-approval") == "put_away"
    assert page.evaluate("document.activeElement.id") == "meta-tool-approval"
    assert page.input_value("#message") == ""
