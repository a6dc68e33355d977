"""Scripted-model turns for the example triage agent
(`turnkeep_agents.release_assistant.triage:agent`): the parent asks its two sub-agents, then
submits its `Triage`; each child's task is a script of its own (providers/scripted.py)."""

from __future__ import annotations

import json
from typing import Any

AGENT = "turnkeep_agents.release_assistant.triage:agent"

VERDICT: dict[str, Any] = {
    "version": "2.4.0",
    "ready": True,
    "blockers": [],
    "summary": "Both tickets are done and CI passed.",
}
DECISION: dict[str, Any] = {
    "version": "2.4.0",
    "action": "ship",
    "blockers": [],
    "changelog": "Fixes: checkout timeout (REL-101)",
}

# The readiness checker looks a ticket up, then submits its Readiness (a child turn).
READINESS_TASK = (
    f'call lookup_ticket {{"ticket_id": "REL-101"}}\nthen\ncall final_result {json.dumps(VERDICT)}'
)
# The changelog writer summarises a ticket; its final text is the call's result.
WRITER_TASK = 'call ticket_summary {"ticket_id": "REL-101"}'


def call(name: str, task: str) -> str:
    """One scripted sub-agent call line."""
    return f"call {name} {json.dumps({'input': task})}"


def readiness_only() -> str:
    """A parent turn with one child turn: the typed readiness checker, then the decision."""
    return (
        f"{call('check_readiness', READINESS_TASK)}\nthen\ncall final_result {json.dumps(DECISION)}"
    )


def both_sub_agents() -> str:
    """A parent turn with both sub-agents called in one round, then the decision."""
    return (
        f"{call('check_readiness', READINESS_TASK)}\n{call('write_changelog', WRITER_TASK)}\n"
        f"then\ncall final_result {json.dumps(DECISION)}"
    )
