"""The console in a real browser (headless Debian chromium against a real `turnkeep serve`
with a typed agent): a turn's validated result is shown as a JSON block under the turn, live
and again after a reload (from the turn view); a text turn shows none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_console_browser import (
    connect,
    last_turn,
    new_session,
    send,
    serving,
    wait_status,
)
from tests.support.browser import chromium
from tests.support.real_server import RealServer, repo_pythonpath

pytestmark = pytest.mark.slow

VERDICT = {"label": "bug", "confidence": 0.75}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RealServer]:
    env = {
        "TURNKEEP_MODEL": "scripted?delay_ms=20",
        "TURNKEEP_AGENT": "tests.support.typed_agent:agent",
        "PYTHONPATH": repo_pythonpath(),
    }
    with serving(tmp_path / "data", env) as real:
        yield real


def test_a_typed_turns_result_is_a_json_block_live_and_after_a_reload(
    server: RealServer,
) -> None:
    with chromium() as browser:
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
        page.wait_for_selector(
            "#transcript .turn[data-status=completed] .turn-result:not([hidden])"
        )
        assert json.loads(last_turn(page).locator(".turn-result pre").inner_text()) == VERDICT
    assert errors == []


def test_a_failed_typed_turn_shows_its_error_and_no_result_block(server: RealServer) -> None:
    with chromium() as browser:
        page = browser.new_page()
        connect(page, server, "tess")
        new_session(page, "bad")
        turn = send(page, "hello")
        wait_status(page, "failed", turn)

        assert last_turn(page).locator(".turn-result").is_hidden()
        assert "output_invalid" in last_turn(page).locator(".turn-error").inner_text()
