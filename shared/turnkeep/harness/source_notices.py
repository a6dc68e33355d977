"""A model round's tool sources: the failure rule, and the notice that says what was left out.

A required source that cannot be listed fails the round (retryably unless its error says
otherwise: `turnkeep.tools.sources`). An optional one is left out of the round's tools and the
turn goes on; the person is told once per turn and source by a `tool_source_unavailable`
entry (an event of the turn: events page, SSE, WebSocket; docs/mcp.md, "Failures"). The entry
hangs off the branch, not on it, so the model never reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from turnkeep.harness.state import OperationState
from turnkeep.providers.base import RetryableModelError
from turnkeep.storage import JsonValue, Storage, Write, insert_entry
from turnkeep.tools.registry import SourceProblem, ToolRegistry

TOOL_SOURCE_UNAVAILABLE = "tool_source_unavailable"
"""Entry type of the notice: data `op`, `round`, `source`, `message`, `tools` (left out; empty:
all of them)."""


@dataclass(frozen=True, slots=True)
class ToolSourceNotice:
    """What an in-process watcher (the chat) is told when a round goes on without a source's
    tools; the same facts as the notice entry."""

    source: str
    message: str
    tools: tuple[str, ...] = ()

    def line(self) -> str:
        """One line for a person: what is missing and why."""
        what = ", ".join(self.tools) if self.tools else "its tools"
        return f"[without {what}: {self.message}]"


def notice_entry_id(op_id: str, source: str) -> str:
    """The notice's entry id: one per turn and source, so a redelivered round writes none."""
    return f"{op_id}:source:{source}"


def required_source_failure(registry: ToolRegistry) -> str | None:
    """The round's fate when a required source is missing: RetryableModelError raised when
    asking again may help (the step's retries, then the turn fails with its text), else the
    turn's error text (a name clash); None when every required source is there."""
    blocked = registry.blocking_problem()
    if blocked is None:
        return None
    if blocked.retryable:
        raise RetryableModelError(blocked.message, code="tool_source_unavailable")
    return f"tool_source_error: {blocked.message}"


def round_notices(
    storage: Storage,
    registry: ToolRegistry,
    state: OperationState,
    parent: str | None,
    on_notice: Callable[[ToolSourceNotice], None] | None = None,
) -> list[Write]:
    """The notice entries this round adds for optional sources it goes without (those without
    one yet in this turn), each also handed to `on_notice`. Required sources are not noticed:
    their failure fails the round."""
    op_id, round_ = state.op_id, state.round
    problems: dict[str, SourceProblem] = {}
    for problem in registry.problems:
        if not problem.required:
            problems.setdefault(problem.source, problem)
    if not problems:
        return []
    ids = {notice_entry_id(op_id, source): source for source in problems}
    for entry in storage.get_entries(list(ids)):
        problems.pop(ids[entry.id], None)
    writes: list[Write] = []
    for source, problem in problems.items():
        data: dict[str, JsonValue] = {
            "op": op_id,
            "round": round_,
            "source": source,
            "message": problem.message,
            "tools": list(problem.tools),
        }
        writes.append(
            insert_entry(notice_entry_id(op_id, source), parent, TOOL_SOURCE_UNAVAILABLE, data)
        )
        if on_notice is not None:
            on_notice(ToolSourceNotice(source, problem.message, problem.tools))
    return writes
