"""The console in a real browser (headless Debian chromium against a real `turnkeep serve`
with the triage agent of tests/support/subagent_agents.py): while a sub-agent call runs, its
child turn appears under the call and fills live from the parent's stream (the child's task,
its tool call), open and collapsible; when the call's result comes, the closed child turn
under the result takes its place (docs/console.md, "Sub-agents"). The writer's tool waits
for a flag file, so the running child is seen without sleeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.browser import chromium
from tests.support.real_server import RealServer, repo_pythonpath

pytestmark = pytest.mark.slow

TASK = json.dumps({"input": "call wait_for_go {}"})
WAIT_MS = 60_000


def test_a_running_sub_agent_call_shows_its_child_turn_live_under_the_call(
    tmp_path: Path,
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    (tmp_path / "data").mkdir()
    server = RealServer(
        tmp_path / "data",
        extra_env={
            "TURNKEEP_MODEL": "scripted?delay_ms=20",
            "TURNKEEP_AGENT": "tests.support.subagent_agents:agent",
            "SUBAGENT_FLAG_DIR": str(flags),
            "PYTHONPATH": repo_pythonpath(),
        },
    )
    server.start()
    try:
        with chromium() as browser:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(server.url + "/")
            page.fill("#token", "dev-tess")
            page.keyboard.press("Enter")
            page.wait_for_selector("#signed-in:has-text('Connected to')")
            page.fill("#new-title", "live child")
            page.keyboard.press("Enter")
            page.wait_for_selector("#session-title:has-text('live child')")
            page.focus("#message")
            page.fill("#message", f"call writer {TASK}")
            page.keyboard.press("Enter")

            parent = page.locator("#transcript > .turn").first
            live = parent.locator("details.child-turn.live")
            child_call = live.locator(".turn pre.call", has_text="wait_for_go")
            child_call.wait_for(timeout=WAIT_MS)
            # Held in its tool: the child runs, the parent has no result yet.
            assert (flags / "started").exists()
            assert parent.locator(".tool-result").count() == 0
            assert live.get_attribute("open") is not None  # open while it runs
            assert live.locator("summary").inner_text() == "child turn · writer · running"
            assert live.locator(".turn .msg.user .bubble-text").inner_text() == (
                "call wait_for_go {}"
            )
            assert live.get_attribute("data-session").startswith("sub-")
            # Under the call: after the parent's bubble that made it.
            order = parent.evaluate(
                """turn => [...turn.querySelector(".turn-body").children].map((node) =>
                  node.matches("details.child-turn") ? "child"
                  : node.querySelector("pre.call") ? "call" : "other")"""
            )
            assert order.index("call") < order.index("child")
            live.locator("summary").click()  # collapsible
            assert live.get_attribute("open") is None
            live.locator("summary").click()
            assert live.get_attribute("open") is not None

            (flags / "go").touch()
            page.wait_for_selector("#transcript > .turn[data-status=completed]", timeout=WAIT_MS)
            # The live block gave way to the closed child turn under the call's result.
            assert parent.locator("details.child-turn.live").count() == 0
            result = parent.locator(".tool-result", has_text="writer")
            closed = result.locator("details.child-turn")
            assert closed.count() == 1
            assert closed.get_attribute("open") is None
            assert (
                closed.locator("summary")
                .inner_text()
                .startswith("child turn · writer · completed · ")
            )
        assert errors == []
    finally:
        server.stop()
    assert not server.tracebacks(), server.tracebacks()
