"""Turn routes: start (202), status, cancel, events paged by the global sequence."""

from __future__ import annotations

import logging
from typing import Annotated, cast

from fastapi import APIRouter, Query, Response

from turnkeep.api.approvals import wake
from turnkeep.api.attachments import turn_attachments
from turnkeep.api.budgets import refuse_over_daily_budget
from turnkeep.api.context import ApiContext, Ctx, SessionId, TurnId, User
from turnkeep.api.errors import ApiError, not_found
from turnkeep.api.model_choice import check_model
from turnkeep.api.models import (
    CancelView,
    EventsPage,
    StartTurnRequest,
    TurnAccepted,
    TurnStatus,
    TurnView,
    error_responses,
)
from turnkeep.api.ratelimit import RateGate
from turnkeep.api.turn_pages import TurnCursorQuery, merged_page, parse_cursor
from turnkeep.envelope import Envelope
from turnkeep.events import (
    TurnNotFound,
    TurnTimeline,
    turn_timeline,
    turn_values,
    turn_view,
)
from turnkeep.harness import (
    FailTurnInput,
    SessionBusyError,
    StartTurnInput,
    begin_turn,
    cancel_turn,
    fail_turn,
    new_op_id,
)
from turnkeep.harness.attachment_checks import refusal_for
from turnkeep.harness.state import head_address

logger = logging.getLogger("turnkeep.api")

router = APIRouter(
    prefix="/sessions/{session_id}/turns",
    tags=["turns"],
    responses=error_responses(400, 401, 404, 405, 422, 503),
)

EventLimit = Annotated[int, Query(ge=1, le=1000, description="events per page")]


def _check_text(ctx: ApiContext, text: str) -> None:
    if not text.strip():
        raise ApiError(422, "validation_error", "text: must not be empty or blank", field="text")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ApiError(
            422,
            "validation_error",
            "text: contains a lone surrogate (not valid Unicode)",
            field="text",
        ) from None
    cap = ctx.settings.max_message_bytes
    if size > cap:
        raise ApiError(
            422,
            "message_too_large",
            f"text: is {size} bytes of UTF-8; the cap is {cap} bytes (messages are never cut)",
            field="text",
        )


def _turn_model(ctx: ApiContext, body: StartTurnRequest, envelope: Envelope) -> str:
    """The turn's model: the body's, else the session's `selectedModel`, else the default
    (each checked against the allowed models)."""
    if body.model is not None:
        return body.model
    selected = envelope.meta.get("selectedModel")
    if isinstance(selected, str) and selected:
        check_model(ctx, selected, "selectedModel")
        return selected
    return ctx.runtime.settings.model


def _check_settings(ctx: ApiContext, body: StartTurnRequest) -> None:
    try:
        ctx.runtime.deps.agent.turn_model_settings(body.model_settings)
    except ValueError as exc:
        field = str(exc).split(":", 1)[0]
        raise ApiError(422, "validation_error", str(exc), field=field) from None


def _check_output_schema(ctx: ApiContext, body: StartTurnRequest) -> None:
    try:
        ctx.runtime.deps.agent.turn_output(body.output_schema)
    except ValueError as exc:
        message = str(exc)
        if not message.startswith("output_schema"):
            message = f"output_schema: {message}"
        raise ApiError(422, "validation_error", message, field="output_schema") from None


@router.post(
    "",
    status_code=202,
    response_model=TurnAccepted,
    responses=error_responses(400, 409, 413, 429),
)
def start(
    ctx: Ctx, user: User, session_id: SessionId, body: StartTurnRequest, response: Response
) -> TurnAccepted:
    """Start a turn: record the message, hand the turn to the orchestrator, answer at once."""
    _check_text(ctx, body.text)
    check_model(ctx, body.model)
    _check_settings(ctx, body)
    _check_output_schema(ctx, body)
    deps = ctx.runtime.deps
    refuse_over_daily_budget(deps, user, ctx.now_ms() / 1000)
    op_id = new_op_id()
    with ctx.storage(session_id) as storage:
        # The envelope and the branch head in one read where the stores share a table.
        envelope = ctx.owned_ahead(user, storage, values=[head_address()], head=True)
        attached = turn_attachments(ctx, storage, body.attachments)
        model = _turn_model(ctx, body, envelope)
        refused = refusal_for(model, attached)
        if refused is not None:
            # At the start, never from the provider mid-turn (docs/attachments.md).
            raise ApiError(422, refused.code, str(refused), field="attachments")
        inp = StartTurnInput(
            session_id=session_id,
            op_id=op_id,
            user_id=user,
            text=body.text,
            # Recorded with the turn (and its settings): a resumed turn keeps its model even
            # if the default or the session's selection changes.
            model=model,
            model_settings=body.model_settings,
            attachments=attached,
            output_schema=body.output_schema,
        )
        gate = RateGate(
            ctx.runtime.envelopes,
            user,
            limit=ctx.settings.turn_start_limit,
            window_seconds=ctx.settings.turn_start_window_seconds,
            now_ms=ctx.now_ms(),
        )
        try:
            begin_turn(deps, storage, inp, envelope, gate=gate, launcher=ctx.launcher)
        except SessionBusyError as exc:
            raise ApiError(409, "turn_running", str(exc)) from None
    try:
        ctx.launcher.launch(session_id, op_id)
    except Exception as exc:
        logger.exception("launch of turn %s in session %s failed", op_id, session_id)
        # Nothing will drive the turn: end it now so the session is not stuck "running".
        fail_turn(
            deps,
            FailTurnInput(
                session_id=session_id,
                op_id=op_id,
                error=f"the turn could not be launched: {type(exc).__name__}: {exc}",
            ),
        )
        raise ApiError(
            503,
            "launch_failed",
            f"the turn could not be started ({type(exc).__name__}); it was recorded as failed, "
            "try again",
            headers={"Retry-After": "1"},
        ) from None
    response.headers["Location"] = f"/sessions/{session_id}/turns/{op_id}"
    return TurnAccepted(turn_id=op_id, status="running")


@router.get("/{turn_id}", response_model=TurnView)
def status(ctx: Ctx, user: User, session_id: SessionId, turn_id: TurnId) -> TurnView:
    """Status of one turn: running / cancelling / completed / failed / aborted."""
    with ctx.storage(session_id) as storage:
        envelope = ctx.owned_ahead(user, storage, values=turn_values(turn_id))
        try:
            return turn_view(storage, envelope, turn_id)
        except TurnNotFound:
            raise not_found("turn") from None


@router.post(
    "/{turn_id}/cancel",
    status_code=202,
    response_model=CancelView,
    responses={
        200: {"model": CancelView, "description": "the turn had already ended; nothing changed"}
    },
)
def cancel(
    ctx: Ctx, user: User, session_id: SessionId, turn_id: TurnId, response: Response
) -> CancelView:
    """Ask a running turn to stop (202); a turn that already ended answers 200, unchanged."""
    envelope = ctx.owned(user, session_id)
    with ctx.storage(session_id) as storage:
        try:
            view = turn_view(storage, envelope, turn_id)
        except TurnNotFound:
            raise not_found("turn") from None
    if view.finished:
        response.status_code = 200
        return CancelView(turn_id=turn_id, status=view.status, cancel_requested=False)
    result = cancel_turn(ctx.runtime.deps, session_id, turn_id)
    status = cast(TurnStatus, result.status)
    if view.status == "awaiting_approval" and status == "aborted":
        # The cancel ended a turn that waited for a person: release its waits (docs/approvals.md).
        if result.wake_tokens:
            wake(ctx.launcher, session_id, turn_id, result.wake_tokens)
        return CancelView(turn_id=turn_id, status=status, cancel_requested=True)
    if status != "cancelling":  # the turn ended between our read and the cancel: nothing changed
        response.status_code = 200
        return CancelView(turn_id=turn_id, status=status, cancel_requested=False)
    return CancelView(turn_id=turn_id, status=status, cancel_requested=True)


@router.get("/{turn_id}/events", response_model=EventsPage, response_model_exclude_none=True)
def events(
    *,
    ctx: Ctx,
    user: User,
    session_id: SessionId,
    turn_id: TurnId,
    cursor: TurnCursorQuery = None,
    limit: EventLimit = 200,
) -> EventsPage:
    """The turn's events after `cursor`: frames of the streaming round, then settled entries,
    its sub-agents' child turns' nested under their calls (docs/api.md, "Sub-agent events")."""
    return merged_page(
        ctx, user, session_id, turn_id, cursor=parse_cursor(cursor), limit=limit
    ).page


@router.get("/{turn_id}/timeline", response_model=TurnTimeline)
def timeline(ctx: Ctx, user: User, session_id: SessionId, turn_id: TurnId) -> TurnTimeline:
    """The turn's rounds, tool calls, approval waits and context shrinks on a time axis, with
    their tokens, from what the turn stores (docs/console.md, "Timeline")."""
    with ctx.storage(session_id) as storage:
        envelope = ctx.owned_ahead(user, storage, values=turn_values(turn_id))
        try:
            return turn_timeline(storage, envelope, turn_id)
        except TurnNotFound:
            raise not_found("turn") from None
