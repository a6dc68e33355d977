"""The console in a real browser (headless Debian chromium against a real `turnkeep serve`
with the triage agent of tests/support/subagent_agents.py): a sub-agent call's result shows
its child turn collapsed; opening it loads the child session's transcript and shows the
child's tool call, its final text, its status and usage (docs/console.md, "Sub-agents")."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_console_browser import (
    axe_critical,
    connect,
    new_session,
    send,
    wait_status,
)
from tests.support.browser import Pages
from tests.support.console import agent_env, module_server
from tests.support.real_server import RealServer

pytestmark = pytest.mark.slow

TASK = json.dumps({"input": 'call count_words {"text": "one two three"}'})


server = module_server(agent_env("tests.support.subagent_agents:agent"))


def test_a_sub_agent_calls_child_turn_opens_to_its_tool_call_and_final_text(
    server: RealServer, browser: Pages
) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    connect(page, server, "tess")
    new_session(page, "triage")
    turn = send(page, f"call research {TASK}")
    wait_status(page, "completed", turn)

    # The parent turn, by position: an opened child turn is a `.turn` inside it.
    parent = page.locator("#transcript > .turn").nth(turn - 1)
    result = parent.locator(".tool-result", has_text="research")
    child = result.locator("details.child-turn")
    assert child.count() == 1
    assert child.get_attribute("open") is None  # closed by default
    assert child.locator(".turn").count() == 0  # nothing loaded before it is opened
    summary = child.locator("summary").inner_text()
    assert summary.startswith("child turn · research · completed · ")
    assert child.get_attribute("data-session").startswith("sub-")

    child.locator("summary").click()
    child.locator(".turn[data-status=completed]").wait_for()
    inner = child.locator(".turn")
    assert inner.get_attribute("data-turn") == child.get_attribute("data-op")
    assert inner.locator(".msg.user .bubble-text").inner_text() == (
        'call count_words {"text": "one two three"}'
    )
    call = inner.locator("pre.call").first.inner_text()
    assert call.startswith("→ count_words(")
    assert json.loads(call[len("→ count_words(") : -1]) == {"text": "one two three"}
    child_result = inner.locator(".tool-result")
    assert child_result.locator(".who").text_content() == "tool result · count_words"
    assert child_result.locator("pre").inner_text() == "3"
    finals = inner.locator(".msg.assistant:not([hidden]) .bubble-text")
    assert finals.last.inner_text() == "Tool count_words returned: 3"
    status = inner.locator(".turn-status").inner_text()
    assert status.startswith("completed · 2 rounds · ")
    assert " in / " in status

    # The child's own timeline, from its session's route.
    inner.locator(".timeline-toggle").click()
    rows = inner.locator(".turn-timeline .tl-row")
    rows.first.wait_for()
    kinds = [row.get_attribute("data-kind") for row in rows.all()]
    assert kinds == ["round", "tool", "round"]

    assert axe_critical(page) == []  # the opened child turn keeps the page accessible

    # The parent's own result is the child's final text; the parent's turn shows only
    # the call and its result, never the child's entries.
    assert "Tool count_words returned: 3" in result.locator("pre").first.inner_text()
    parent_calls = parent.locator(":scope > .turn-body > .msg pre.call")
    assert [c.inner_text().split("(")[0] for c in parent_calls.all()] == ["→ research"]

    child.locator("summary").click()  # closes again
    assert child.get_attribute("open") is None

    # After a reload the history (the transcript route) shows the same child turn.
    page.reload()
    # (by title: the child session is the same user's too, and listed as the newer one)
    page.locator("#session-list .session-button", has_text="triage").click()
    again = page.locator("#transcript > .turn details.child-turn")
    again.wait_for()
    again.locator("summary").click()
    again.locator(".turn[data-status=completed]").wait_for()
    reloaded = again.locator(".turn .msg.assistant:not([hidden]) .bubble-text")
    assert reloaded.last.inner_text() == "Tool count_words returned: 3"
    assert errors == []
