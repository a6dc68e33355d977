"""Request and response bodies of the HTTP API (pydantic; they make the OpenAPI schema)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from turnkeep.events.models import (  # the event read models, served by this API as they are
    Delta,
    Event,
    EventsPage,
    TranscriptPage,
    TurnStatus,
    TurnView,
)
from turnkeep.session_ids import SESSION_ID_PATTERN
from turnkeep.turn_rules import OP_ID_PATTERN

TURN_ID_PATTERN = OP_ID_PATTERN
"""Turn (operation) ids: the harness rule, 1-100 characters."""

MetaValue = StrictStr | StrictInt | StrictFloat | StrictBool


class ErrorDetail(BaseModel):
    """What went wrong: a stable `code`, a readable `message`, the offending `field` if any."""

    code: str
    message: str
    field: str | None = None


class ErrorBody(BaseModel):
    """The body of every error answer (4xx and 5xx)."""

    error: ErrorDetail


_ERROR_DESCRIPTIONS = {
    400: "bad request: a singleton header (Authorization, Content-Length, Host, Content-Type) "
    "sent twice; a body the JSON parser gives up on (e.g. a 5000-digit number); for PUT meta "
    "also a key the host may not set",
    401: "no usable identity (JWT `sub` claim; locally `Bearer dev-<user>`)",
    404: "no such session or turn of the caller (another user's answers the same)",
    405: "the path exists, but not with this method",
    409: "conflict (a turn is running, the id is taken, the session is being deleted)",
    413: "request body too large",
    422: "invalid input: the message names the field",
    429: "turn-start rate limit (see `Retry-After`)",
    501: "this deployment cannot stream over HTTP (subscribe on the WebSocket API, or poll "
    "the events page)",
    503: "a store is unavailable, or the turn could not be launched (retry)",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for error statuses, all with the `ErrorBody` shape."""
    return {
        status: {"model": ErrorBody, "description": _ERROR_DESCRIPTIONS[status]}
        for status in statuses
    }


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateSessionRequest(_Body):
    """A new session owned by the caller; the id is generated unless the client picks one."""

    session_id: str | None = Field(
        default=None,
        pattern=SESSION_ID_PATTERN,
        description="client-chosen id (1-128 of A-Z a-z 0-9 . _ : -); 409 when taken",
    )
    title: StrictStr | None = Field(default=None, description="host meta `title` (≤ 1 KiB)")
    persona_snapshot: StrictStr | None = Field(
        default=None,
        alias="personaSnapshot",
        description="host meta `personaSnapshot` (≤ 128 KiB): standing orders folded after the "
        "agent's instructions in every turn's system prompt (docs/envelope.md)",
    )


class StartTurnRequest(_Body):
    """A user message; the turn runs in the background."""

    text: StrictStr = Field(description="the user message (capped, see `max_message_bytes`)")
    model: StrictStr | None = Field(
        default=None,
        max_length=512,
        description="model spec; must be the server default or in its allow-list (absent: the "
        "session's `selectedModel`, else the default)",
    )
    model_settings: dict[str, Any] | None = Field(
        default=None,
        description="model settings of this turn over the agent's (only those the agent lets a "
        "turn set, docs/agent.md; by default max_tokens, temperature, top_p, stop)",
    )
    attachments: list[StrictStr] = Field(
        default_factory=list,
        max_length=25,
        description="ids of this session's ready attachments sent with the message "
        "(docs/attachments.md)",
    )
    output_schema: dict[str, Any] | None = Field(
        default=None,
        description="a JSON Schema the turn's result must match, submitted through the "
        "`final_result` tool (only where the agent's `turn_settings` name `output_schema`; "
        'at most 16384 bytes; docs/agent.md, "Typed results")',
    )


class TurnSummary(BaseModel):
    """The session's latest turn as the envelope records it."""

    turn_id: str | None = None
    status: TurnStatus = "idle"
    started_at: int | None = Field(default=None, description="epoch ms")
    finished_at: int | None = Field(default=None, description="epoch ms")
    error: str | None = None
    step_count: int | None = None
    usage: dict[str, Any] | None = None


class SessionUsage(BaseModel):
    """A session's totals over all its turns' usage rows (docs/usage.md, "Seeing it")."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_micros: int = Field(default=0, description="integer micro-dollars (1 USD = 1,000,000)")


class SessionView(BaseModel):
    """A session envelope as its owner sees it (host meta; working notes via /notes)."""

    session_id: str
    created_at: int = Field(description="epoch ms")
    updated_at: int = Field(description="epoch ms")
    meta: dict[str, MetaValue] = Field(description="host meta keys")
    turn: TurnSummary
    has_working_notes: bool
    parent_session_id: str | None = Field(
        default=None,
        description="a sub-agent call's child session: the session of the calling turn "
        "(docs/agent.md, 'Sub-agents'); null for a session a person started",
    )
    usage: SessionUsage | None = Field(
        default=None,
        description="the session's totals over all its turns (GET /sessions/{id} only; "
        "null in lists, which do not read each session's storage)",
    )


class SessionList(BaseModel):
    """The caller's sessions in the order asked for (oldest first by default), one page."""

    sessions: list[SessionView]
    next_cursor: str | None = Field(
        default=None,
        description="pass as `cursor` for the next page; null when this page is the last",
    )


class TurnAccepted(BaseModel):
    """A started turn."""

    turn_id: str
    status: TurnStatus


class CancelView(BaseModel):
    """What a cancel request found or did."""

    turn_id: str
    status: TurnStatus
    cancel_requested: bool = Field(
        description="false when the turn had already ended (nothing changed)"
    )


class NotesView(BaseModel):
    """The session's working notes (read-only here: the tools are the only writers)."""

    notes: str | None
    bytes: int = Field(description="the notes' size in UTF-8 bytes")
    max_bytes: int = Field(description="the cap an update may not exceed (UTF-8 bytes)")


__all__ = [
    "TURN_ID_PATTERN",
    "CancelView",
    "CreateSessionRequest",
    "Delta",
    "ErrorBody",
    "ErrorDetail",
    "Event",
    "EventsPage",
    "MetaValue",
    "NotesView",
    "SessionList",
    "SessionView",
    "StartTurnRequest",
    "TranscriptPage",
    "TurnAccepted",
    "TurnStatus",
    "TurnSummary",
    "TurnView",
    "error_responses",
]
