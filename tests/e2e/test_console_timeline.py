"""A turn's timeline in the console (headless Debian chromium against a real `turnkeep serve`):
its model rounds, tool calls and approval wait as bars on one time axis with their tokens, from
what the turn stores (no tracing backend). The screenshot goes to `TURNKEEP_CONSOLE_SCREENSHOTS`
(docs/console/10-timeline.png) or a tmp dir."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.test_console_browser import (
    TURN_MS,
    api_client,
    axe_critical,
    connect,
    last_turn,
    new_session,
    send,
    set_tool_approval,
    wait_status,
)
from tests.support.browser import Pages, screenshot_dir
from tests.support.console import agent_env, module_server
from tests.support.real_server import RealServer

pytestmark = pytest.mark.slow


# Slow frames: each round takes a visible while on the axis.
server = module_server(
    agent_env("tests.support.timeline_agent:agent", model="scripted?delay_ms=60")
)


def test_a_turns_timeline_shows_its_rounds_tools_and_approval_wait_as_bars_with_tokens(
    server: RealServer, tmp_path: Path, browser: Pages
) -> None:
    target = screenshot_dir(tmp_path / "shots")
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    connect(page, server, "tess")
    new_session(page, "Kitchen")
    set_tool_approval(page, "announce")

    turn = send(page, 'call brew {"seconds": 0.8}\ncall announce {"text": "coffee is on"}')
    card = page.locator("#transcript .approval.pending")
    card.wait_for(timeout=TURN_MS)
    time.sleep(0.6)  # the person takes a moment: the wait has a length on the axis
    card.locator("button", has_text="Approve").click()
    wait_status(page, "completed", turn)

    last_turn(page).locator("button.timeline-toggle").click()
    timeline = last_turn(page).locator(".timeline")
    timeline.wait_for(timeout=10_000)
    rows = timeline.locator(".tl-row")
    kinds = [r.get_attribute("data-kind") for r in rows.all()]
    assert kinds.count("round") == 2, kinds
    assert kinds.count("tool") == 2, kinds
    assert kinds.count("approval") == 1, kinds
    text = timeline.inner_text()
    assert "brew" in text
    assert "approval wait announce · approve" in text
    assert "in / " in text
    assert "out tokens" in text
    # Bars sit on one axis in time order: the approval wait starts after the first round.
    lefts = timeline.evaluate(
        """el => [...el.querySelectorAll('.tl-row')].map(r =>
             [r.dataset.kind, parseFloat(r.querySelector('.tl-bar').style.left),
              parseFloat(r.querySelector('.tl-bar').style.width)])"""
    )
    assert lefts == sorted(lefts, key=lambda row: row[1])
    assert all(0 <= left <= 100 and 0 < width <= 100 for _, left, width in lefts)
    brew_bar = next(width for kind, _, width in lefts if kind == "tool")
    assert brew_bar > 0.4  # 0.8 s of a turn of a few seconds: wider than the minimum
    last_turn(page).scroll_into_view_if_needed()
    page.screenshot(path=str(target / "10-timeline.png"))
    critical = axe_critical(page)
    assert not critical, critical
    assert errors == []

    # What the page drew is what the route says the turn stored.
    with api_client(server, "tess") as client:
        sid = client.get("/sessions").json()["sessions"][0]["session_id"]
        turns = client.get(f"/sessions/{sid}/transcript", params={"limit": 100}).json()
        op = turns["entries"][0]["entry_id"].split(":")[0]
        stored = client.get(f"/sessions/{sid}/turns/{op}/timeline").json()
    assert [b["kind"] for b in stored["bars"]] == kinds
    assert stored["untimed"] == 0
    assert stored["started_at"] <= stored["bars"][0]["start"]
    assert stored["bars"][-1]["end"] <= stored["finished_at"]
