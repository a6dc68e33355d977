"""A triage agent whose `mailer` sub-agent has a tool that waits for a person's approval:
`send_mail` appends its recipient to `$SUBAGENT_MAIL_LOG` (so a test sees it ran, once)."""

from __future__ import annotations

import os
from pathlib import Path

from turnkeep import Agent, tool


@tool(requires_approval=True)
def send_mail(to: str) -> str:
    """Send a mail.

    Args:
        to: The recipient.
    """
    log = Path(os.environ.get("SUBAGENT_MAIL_LOG", "mail.log"))
    with log.open("a", encoding="utf-8") as out:
        out.write(f"{to}\n")
    return f"sent to {to}"


mailer = Agent(name="mailer", description="Sends mail.", tools=[send_mail])

agent = Agent(name="triage", description="Hands mail to the mailer.", agents=[mailer])

TASK_TEXT = 'call mailer {"input": "call send_mail {\\"to\\": \\"ops@example.com\\"}"}'
"""The user message that makes the scripted model call the mailer, which calls send_mail."""
