"""Where a sub-agent's child turn sits for the WebSocket pusher: the turns above it (parent,
grandparent, ...) whose subscribers see its events nested under the calls (docs/api.md,
"Sub-agent events"). A child runs as an execution of its own on Step Functions, so its steps
find the parents' subscriptions from the child session's link (one read per process)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from turnkeep.events.models import NestedCall
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.subagents import CHILD_SESSION_PREFIX, load_link


@dataclass(frozen=True, slots=True)
class Above:
    """A turn above a child turn, and the calls the child runs under as seen from it."""

    session_id: str
    op_id: str
    nested: tuple[NestedCall, ...]


ParentOf = Callable[[str], tuple[str, str, NestedCall] | None]
"""A child session's parent turn (session, op) and its call; None for any other session."""


def parent_finder(deps: HarnessDeps) -> ParentOf:
    """`ParentOf` reading each child session's link from storage (`subagents.load_link`)."""

    def parent_of(session_id: str) -> tuple[str, str, NestedCall] | None:
        if not session_id.startswith(CHILD_SESSION_PREFIX):
            return None
        link = load_link(deps, session_id)
        if link is None:
            return None
        call = NestedCall(
            call_id=link.call_id,
            agent=link.agent,
            session_id=link.session_id,
            op_id=link.op_id,
            depth=1,
        )
        return link.parent_session_id, link.parent_op_id, call

    return parent_of


MAX_DEPTH = 16
"""Links followed up at most (sub-agent depth is capped far below: docs/agent.md)."""


def turns_above(parent_of: ParentOf, session_id: str) -> list[Above]:
    """Every turn above child session `session_id`, nearest first; [] for a top-level one."""
    found: list[Above] = []
    calls: list[NestedCall] = []
    current = session_id
    for _ in range(MAX_DEPTH):
        parent = parent_of(current)
        if parent is None:
            break
        parent_session, parent_op, call = parent
        calls = [call, *calls]
        numbered = tuple(c.model_copy(update={"depth": i + 1}) for i, c in enumerate(calls))
        found.append(Above(parent_session, parent_op, numbered))
        current = parent_session
    return found
