"""A turn's events page as the events route and the stream read it: the turn's own events with
its sub-agents' child turns merged in, each child event nested under its call (docs/api.md,
"Sub-agent events"), every child session read as the caller's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import Query

from turnkeep.api.context import ApiContext
from turnkeep.api.errors import ApiError, not_found
from turnkeep.envelope import Envelope
from turnkeep.events import (
    CURSOR_PATTERN,
    CursorError,
    MergedPage,
    OpenChild,
    TurnCursor,
    TurnNotFound,
    nested_turn_events,
    turn_values,
)
from turnkeep.harness.state import user_entry_id
from turnkeep.harness.subagents import deps_for_session
from turnkeep.storage import Storage

TurnCursorQuery = Annotated[
    str | None,
    Query(
        max_length=12_000,
        pattern=CURSOR_PATTERN,
        description="exclusive: the `next_cursor` of the previous page (a seq, or with "
        "sub-agents' child turns `<seq>:<child>=<seq>,...`)",
    ),
]


def parse_cursor(text: str | None, field: str = "cursor") -> TurnCursor:
    """The cursor a client sent (422 when it is not one)."""
    try:
        return TurnCursor.parse(text)
    except CursorError as exc:
        raise ApiError(422, "validation_error", str(exc), field=field) from None


def child_opener(ctx: ApiContext, user: str) -> OpenChild:
    """Opens a child session for the merged page: None when absent or not `user`'s."""

    @contextmanager
    def open_child(session_id: str) -> Iterator[tuple[Storage, Envelope | None] | None]:
        envelope = ctx.runtime.envelopes.get(session_id)
        if envelope is None or envelope.owner_id != user:
            yield None
            return
        with ctx.storage(session_id) as storage:
            yield storage, envelope

    return open_child


def merged_page(
    ctx: ApiContext, user: str, session_id: str, turn_id: str, *, cursor: TurnCursor, limit: int
) -> MergedPage:
    """The caller's turn's merged events after `cursor` (404 when not theirs)."""
    with ctx.storage(session_id) as storage:
        # One read for the envelope, the turn's record or state and its first event's place.
        envelope = ctx.owned_ahead(
            user, storage, values=turn_values(turn_id), entries=[user_entry_id(turn_id)]
        )
        agent = deps_for_session(ctx.runtime.deps, session_id).agent
        try:
            return nested_turn_events(
                storage,
                envelope,
                turn_id,
                cursor,
                limit,
                agent=agent,
                open_child=child_opener(ctx, user),
            )
        except TurnNotFound:
            raise not_found("turn") from None
