"""The console in a real browser (headless Debian chromium against a real `turnkeep serve` with
the agent of tests/support/approving_subagent.py): a sub-agent's call that needs a person shows
its card in the parent's turn and in the pending list, marked with the sub-agent; approving it
there runs the call and the parent turn completes (docs/approvals.md, "Inside a sub-agent")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_console_browser import connect, new_session, send, serving, wait_status
from tests.support.approving_subagent import TASK_TEXT
from tests.support.browser import chromium
from tests.support.real_server import RealServer, repo_pythonpath

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RealServer]:
    env = {
        "TURNKEEP_MODEL": "scripted?delay_ms=20",
        "TURNKEEP_AGENT": "tests.support.approving_subagent:agent",
        "SUBAGENT_MAIL_LOG": str(tmp_path / "mail.log"),
        "PYTHONPATH": repo_pythonpath(),
    }
    with serving(tmp_path / "data", env) as real:
        yield real


def test_a_sub_agents_approval_card_is_marked_and_approving_it_completes_the_parent(
    server: RealServer, tmp_path: Path
) -> None:
    with chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        connect(page, server, "tess")
        new_session(page, "mail")
        turn = send(page, TASK_TEXT)
        wait_status(page, "awaiting_approval", turn)

        card = page.locator("#transcript .approval.pending")
        card.wait_for(timeout=10_000)
        assert "Approval needed: send_mail" in card.inner_text()
        assert card.locator(".approval-subagent").inner_text() == "Asked by sub-agent mailer"
        listed = page.locator("#pending-list .approval.pending")
        listed.wait_for(timeout=10_000)
        assert listed.locator(".approval-subagent").inner_text() == "Asked by sub-agent mailer"
        assert not (tmp_path / "mail.log").exists()

        card.get_by_role("button", name="Approve").click()
        wait_status(page, "completed", turn)

        assert (tmp_path / "mail.log").read_text() == "ops@example.com\n"
        # The list holds the session the person started, not the sub-agent's child session.
        page.reload()
        page.locator("#session-list .session-button", has_text="mail").wait_for()
        assert page.locator("#session-list .session-button").count() == 1
        assert errors == []
