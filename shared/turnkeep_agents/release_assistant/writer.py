"""The changelog writer: a sub-agent of the release assistant (docs/agent.md, "Sub-agents").

The assistant hands it a task (`write_changelog {"input": "..."}`); it runs as a child turn of
its own, with its own instructions and the one tool it needs, and its final text is the
assistant's tool result.
"""

from __future__ import annotations

from turnkeep import Agent, tool
from turnkeep_agents.release_assistant import tracker

INSTRUCTIONS = """\
You write the changelog of one ACME web shop release. Look up every ticket you are given, then
answer with the changelog only: a heading per group (Features, Fixes, Chores), one line per
ticket as `- <title> (<ticket id>)`. Leave out tickets that are not done, and say which ones you
left out and why below the changelog."""


@tool(replay_safe=True, isolation="in_process")
def ticket_summary(ticket_id: str) -> str:
    """One ticket as a changelog line would need it: title, status and labels.

    Args:
        ticket_id: The ticket key, e.g. REL-101.
    """
    key = ticket_id.strip().upper()
    found = tracker.TICKETS.get(key)
    if found is None:
        raise LookupError(f"no ticket {ticket_id!r}")
    labels = ", ".join(found.get("labels", [])) or "none"
    return f"{key}: {found['title']} (status {found['status']}, labels {labels})"


writer = Agent(
    name="changelog_writer",
    description="Writes the changelog of a release from its ticket ids, grouped by kind.",
    instructions=INSTRUCTIONS,
    tools=[ticket_summary],
    model_settings={"temperature": 0.0, "max_tokens": 1024},
)
