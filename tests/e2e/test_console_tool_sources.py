"""The console tells a person when a turn goes on without a tool source: headless chromium
against a real `turnkeep serve` whose agent's MCP server is down."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_console_browser import connect, new_session, send, serving, wait_status
from tests.support.browser import Pages
from tests.support.mcp_agent import REFERENCE, URL_ENV
from tests.support.mcp_servers import free_port
from tests.support.real_server import repo_pythonpath

pytestmark = pytest.mark.slow


def test_a_turn_without_its_down_mcp_server_shows_a_notice_saying_so(
    tmp_path: Path, browser: Pages
) -> None:
    env = {
        "TURNKEEP_AGENT": REFERENCE,
        URL_ENV: f"http://127.0.0.1:{free_port()}/mcp",
        "PYTHONPATH": repo_pythonpath(),
    }
    with serving(tmp_path / "data", env) as real:
        page = browser.new_page()
        connect(page, real, "erin")
        new_session(page, "kb down")
        turn = send(page, 'call shout {"text": "ok"}')
        wait_status(page, "completed", turn)
        notice = page.locator("#transcript .source-notice")
        notice.wait_for()
        text = notice.inner_text()
        role = notice.get_attribute("role")
        results = page.locator("#transcript .tool-result").all_inner_texts()

    assert role == "status"  # read out by screen readers without taking the focus
    assert text.startswith("Going on without the tools of kb")
    assert "tool source 'kb': cannot list its tools: ConnectError" in text
    assert any("OK" in r for r in results)
