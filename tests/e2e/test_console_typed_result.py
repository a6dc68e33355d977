"""The console in a real browser (headless Debian chromium against a real `turnkeep serve`
with a typed agent): a turn's validated result is shown as a JSON block under the turn, live
and again after a reload (from the turn view); a text turn shows none."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_console_browser import (
    connect,
    last_turn,
    new_session,
    send,
    wait_status,
)
from tests.support.browser import Pages
from tests.support.console import agent_env, module_server
from tests.support.real_server import RealServer

pytestmark = pytest.mark.slow

VERDICT = {"label": "bug", "confidence": 0.75}


server = module_server(agent_env("tests.support.typed_agent:agent"))


def test_a_typed_turns_result_is_a_json_block_live_and_after_a_reload(
    server: RealServer, browser: Pages
) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    connect(page, server, "tess")
    new_session(page, "triage")
    turn = send(page, f"call final_result {json.dumps(VERDICT)}")
    wait_status(page, "completed", turn)

    block = last_turn(page).locator(".turn-result")
    assert block.is_visible()
    assert block.get_attribute("aria-label") == "result"
    assert json.loads(block.locator("pre").inner_text()) == VERDICT
    assert block.locator("pre").inner_text() == json.dumps(VERDICT, indent=2)

    page.reload()  # the token is kept: the session list comes back
    page.locator("#session-list .session-button").first.click()
    page.wait_for_selector("#transcript .turn[data-status=completed] .turn-result:not([hidden])")
    assert json.loads(last_turn(page).locator(".turn-result pre").inner_text()) == VERDICT
    assert errors == []


def test_a_failed_typed_turn_shows_its_error_and_no_result_block(
    server: RealServer, browser: Pages
) -> None:
    page = browser.new_page()
    connect(page, server, "tom")  # a user of its own on the shared server
    new_session(page, "bad")
    turn = send(page, "hello")
    wait_status(page, "failed", turn)

    assert last_turn(page).locator(".turn-result").is_hidden()
    assert "output_invalid" in last_turn(page).locator(".turn-error").inner_text()
