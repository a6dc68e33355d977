"""Session routes: create, list, get, delete, host meta PUT, notes, transcript."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Query, Response

from turnkeep.api.attachments import mark_removed
from turnkeep.api.context import Ctx, SessionId, User
from turnkeep.api.errors import ApiError
from turnkeep.api.model_choice import check_model
from turnkeep.api.models import (
    CreateSessionRequest,
    MetaValue,
    NotesView,
    SessionList,
    SessionView,
    TranscriptPage,
    error_responses,
)
from turnkeep.api.session_pages import SESSION_CURSOR_PATTERN, session_page
from turnkeep.api.views import session_view
from turnkeep.envelope import (
    EnvelopeConflictError,
    EnvelopeExistsError,
    MetaValidationError,
    turn_run_id,
)
from turnkeep.envelope.caps import WORKING_NOTES_MAX_BYTES
from turnkeep.events import CURSOR_MAX, transcript_page
from turnkeep.harness import reconcile_envelope
from turnkeep.harness.session_removal import is_child_session, remove_session_tree
from turnkeep.storage import open_repository
from turnkeep.turn_rules import DELETE_MARKER, STARTABLE_STATUSES

router = APIRouter(
    prefix="/sessions", tags=["sessions"], responses=error_responses(400, 401, 405, 503)
)
_SESSION = error_responses(404, 422)

Cursor = Annotated[
    int | None,
    Query(ge=0, le=CURSOR_MAX, description="exclusive: the `next_cursor` of the previous page"),
]
Limit = Annotated[int, Query(ge=1, le=1000, description="page size")]


@router.post(
    "",
    status_code=201,
    response_model=SessionView,
    responses=error_responses(400, 409, 413, 422),
)
def create_session(ctx: Ctx, user: User, body: CreateSessionRequest | None = None) -> SessionView:
    """Create a session owned by the caller (409 when a client-chosen id is taken)."""
    request = body or CreateSessionRequest()
    session_id = request.session_id or f"s-{uuid.uuid4().hex}"
    host: dict[str, str] = {}
    if request.title is not None:
        host["title"] = request.title
    if request.persona_snapshot is not None:
        host["personaSnapshot"] = request.persona_snapshot
    try:
        envelope = ctx.runtime.envelopes.create(session_id, user, host)
    except EnvelopeExistsError:
        raise ApiError(
            409, "session_exists", f"session_id: {session_id!r} is taken", field="session_id"
        ) from None
    except MetaValidationError as exc:
        field = "personaSnapshot" if "personaSnapshot" in str(exc) else "title"
        raise ApiError(422, "validation_error", str(exc), field=field) from None
    return session_view(envelope)


SessionOrder = Annotated[
    Literal["oldest", "newest"],
    Query(description="`oldest` first (the default) or `newest` first, by creation time"),
]
SessionCursor = Annotated[
    str | None,
    Query(
        max_length=160,
        pattern=SESSION_CURSOR_PATTERN,
        description="exclusive: the `next_cursor` of the previous page",
    ),
]
SessionLimit = Annotated[
    int | None, Query(ge=1, le=1000, description="page size (absent: every session)")
]
ChildrenFlag = Annotated[
    bool,
    Query(
        description="also list sub-agent child sessions (each names its `parent_session_id`); "
        "by default a listing holds only the sessions a person started"
    ),
]


@router.get("", response_model=SessionList, responses=error_responses(422))
def list_sessions(
    ctx: Ctx,
    user: User,
    *,
    order: SessionOrder = "oldest",
    cursor: SessionCursor = None,
    limit: SessionLimit = None,
    children: ChildrenFlag = False,
) -> SessionList:
    """The caller's sessions, oldest first unless `order=newest`; paged when `limit` is given.
    Sub-agent child sessions are left out unless `children=true` (docs/agent.md)."""
    listed = ctx.runtime.envelopes.list_for_owner(user)
    if not children:
        listed = [e for e in listed if not is_child_session(e)]
    page, next_cursor = session_page(listed, order=order, cursor=cursor, limit=limit)
    deps = ctx.runtime.deps
    return SessionList(
        sessions=[session_view(reconcile_envelope(deps, e)) for e in page],
        next_cursor=next_cursor,
    )


@router.get("/{session_id}", response_model=SessionView, responses=_SESSION)
def get_session(ctx: Ctx, user: User, session_id: SessionId) -> SessionView:
    """One of the caller's sessions, with its usage totals over all its turns."""
    envelope = ctx.owned(user, session_id)
    with ctx.storage(session_id) as storage:
        stats = storage.get_stats()
    return session_view(envelope, stats)


@router.delete(
    "/{session_id}",
    status_code=204,
    response_class=Response,
    responses={**_SESSION, **error_responses(409)},
)
def delete_session(ctx: Ctx, user: User, session_id: SessionId) -> Response:
    """Remove the envelope and every stored record of the session and of its sub-agent child
    sessions; 409 while a turn runs."""
    ctx.owned(user, session_id)
    envelopes = ctx.runtime.envelopes
    try:
        # Claim the session like a turn start would, so no turn can start while we delete.
        envelopes.update_worker_meta(
            session_id,
            {"turnStatus": "running", "turnRunId": DELETE_MARKER},
            expect={"turnStatus": STARTABLE_STATUSES},
            owner_id=user,
        )
    except EnvelopeConflictError:
        current = ctx.owned(user, session_id)
        if turn_run_id(current.meta) != DELETE_MARKER:  # else: finish an earlier delete
            raise ApiError(
                409,
                "turn_running",
                f"session {session_id!r} has a turn in progress "
                f"({current.meta.get('turnRunId')!r}); cancel it and wait for it to end first",
            ) from None
    repository = open_repository(ctx.runtime.storage_url)
    try:
        remove_session_tree(envelopes, repository, user, session_id)
    finally:
        repository.close()
    return Response(status_code=204)


@router.put(
    "/{session_id}/meta",
    response_model=SessionView,
    responses={**_SESSION, **error_responses(400, 413, 422)},
)
def put_meta(
    ctx: Ctx,
    user: User,
    session_id: SessionId,
    meta: Annotated[
        dict[str, MetaValue | None],
        Body(description="the full host key set: a key left out is cleared; null clears too"),
    ],
) -> SessionView:
    """Replace the host meta keys (never the working notes or any worker key); a
    `selectedModel` the server does not offer is refused here, not at every later turn."""
    ctx.owned(user, session_id)
    selected = meta.get("selectedModel")
    if isinstance(selected, str) and selected:
        check_model(ctx, selected, "selectedModel")
    try:
        envelope = ctx.runtime.envelopes.put_host_meta(session_id, user, meta)
    except MetaValidationError as exc:
        # The store's own check, mapped: a key the host may not write is the request's fault
        # (400), a bad value of a host key is a validation error (422).
        status = 422 if exc.code == "invalid_meta" else 400
        raise ApiError(status, exc.code, str(exc), field=exc.field) from None
    return session_view(envelope)


@router.get("/{session_id}/notes", response_model=NotesView, responses=_SESSION)
def get_notes(ctx: Ctx, user: User, session_id: SessionId) -> NotesView:
    """The working notes (read-only: only the working_notes_* tools write them)."""
    notes = ctx.owned(user, session_id).working_notes
    return NotesView(
        notes=notes,
        bytes=len(notes.encode("utf-8")) if notes else 0,
        max_bytes=WORKING_NOTES_MAX_BYTES,
    )


@router.get(
    "/{session_id}/transcript",
    response_model=TranscriptPage,
    response_model_exclude_none=True,
    responses=_SESSION,
)
def get_transcript(
    ctx: Ctx, user: User, session_id: SessionId, cursor: Cursor = None, limit: Limit = 100
) -> TranscriptPage:
    """Settled transcript entries after `cursor`, in sequence order."""
    ctx.owned(user, session_id)
    with ctx.storage(session_id) as storage:
        return mark_removed(transcript_page(storage, cursor, limit), storage)
