"""ACME's release assistant: looks tickets up, checks CI, publishes release notes (approved),
and hands changelog writing to its writer sub-agent (`writer.py`).

Run it: `turnkeep chat --agent turnkeep_agents.release_assistant:agent` (README, "Your agent").
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from turnkeep import Agent, mcp_server, tool
from turnkeep_agents.release_assistant import tracker
from turnkeep_agents.release_assistant.writer import writer

INSTRUCTIONS = """\
You are the release assistant of ACME's web shop team. You help the release manager prepare a
release: look up the tickets that go into it, check that CI is green on the release branch, and
draft short release notes grouped as Features, Fixes and Chores. Publish notes only when the
release manager asks for it; publishing waits for their approval. How releases work (the freeze,
hotfixes, rollbacks, earlier release notes) is in ACME's release docs: search them rather than
guess. To write a release's changelog, hand the ticket ids to write_changelog and use its answer.
Say plainly when a ticket or a pipeline cannot be found, and never invent ticket numbers."""


class Ticket(BaseModel):
    """A ticket as the tracker reports it."""

    id: str
    title: str
    status: Literal["todo", "in_progress", "done"]
    fix_version: str
    labels: list[str] = Field(default_factory=list)


@tool(replay_safe=True, isolation="in_process")
def lookup_ticket(ticket_id: str) -> Ticket:
    """Look up one ticket of ACME's tracker.

    Args:
        ticket_id: The ticket key, e.g. REL-101.
    """
    found = tracker.TICKETS.get(ticket_id.strip().upper())
    if found is None:
        raise LookupError(f"no ticket {ticket_id!r} (known: {', '.join(sorted(tracker.TICKETS))})")
    return Ticket(id=ticket_id.strip().upper(), **found)


@tool(replay_safe=True, timeout_seconds=10)
async def check_ci(
    branch: str = "main", limit: Annotated[int, Field(ge=1, le=20)] = 3
) -> list[dict[str, object]]:
    """The latest CI runs of a branch, newest first.

    Args:
        branch: The git branch, e.g. main or release/2.4.
        limit: How many runs to return (1-20).
    """
    await asyncio.sleep(0)  # a real agent awaits its CI's HTTP API here
    runs = tracker.PIPELINES.get(branch)
    if runs is None:
        raise LookupError(f"no pipeline for branch {branch!r}")
    return runs[:limit]


@tool(requires_approval=True, timeout_seconds=15)
def publish_release_notes(
    version: str, notes: str, channel: Literal["internal", "public"] = "internal"
) -> str:
    """Publish release notes to ACME's changelog (a person approves each call first).

    Args:
        version: The release version, e.g. 2.4.0.
        notes: The release notes, in Markdown.
        channel: internal (the team's changelog) or public (the customers' changelog).
    """
    count = tracker.append_release(version, channel, notes)
    return f"published {version} to the {channel} changelog ({count} releases published so far)"


agent = Agent(
    name="release_assistant",
    description="Prepares ACME's releases: tickets, CI status and release notes.",
    instructions=INSTRUCTIONS,
    tools=[lookup_ticket, check_ci, publish_release_notes],
    # ACME's release docs (docs_server.py beside this file, as `python -m` runs it locally;
    # TURNKEEP_MCP_URLS='{"docs": "https://..."}' points a deployment at its own). Its tools,
    # docs_search and docs_get_page, only read: a call whose outcome is unknown may run again.
    mcp_servers=[mcp_server("docs", url="http://127.0.0.1:8765/mcp", replay_safe=True)],
    model_settings={"temperature": 0.2, "max_tokens": 2048},
    # A sub-agent: each call is a child turn of its own (docs/agent.md, "Sub-agents").
    agents=[
        writer.as_tool(
            name="write_changelog",
            description="Write the changelog of a release: give it the release's ticket ids "
            "(and anything it should know); it answers with the changelog.",
        )
    ],
)
