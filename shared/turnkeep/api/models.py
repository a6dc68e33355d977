"""Request and response bodies of the HTTP API (pydantic; they make the OpenAPI schema)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from turnkeep.providers.base import Usage
from turnkeep.session_ids import SESSION_ID_PATTERN
from turnkeep.turn_rules import OP_ID_PATTERN
from turnkeep.turn_rules import TurnStatus as HarnessTurnStatus

TURN_ID_PATTERN = OP_ID_PATTERN
"""Turn (operation) ids: the harness rule, 1-100 characters."""

MetaValue = StrictStr | StrictInt | StrictFloat | StrictBool
TurnStatus = Literal[HarnessTurnStatus, "deleting"]
"""A turn's status as the API shows it: the harness's, or `deleting` while its session goes."""


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


class TurnSummary(BaseModel):
    """The session's latest turn as the envelope records it."""

    turn_id: str | None = None
    status: TurnStatus = "idle"
    started_at: int | None = Field(default=None, description="epoch ms")
    finished_at: int | None = Field(default=None, description="epoch ms")
    error: str | None = None
    step_count: int | None = None
    usage: dict[str, Any] | None = None


class SessionView(BaseModel):
    """A session envelope as its owner sees it (host meta; working notes via /notes)."""

    session_id: str
    created_at: int = Field(description="epoch ms")
    updated_at: int = Field(description="epoch ms")
    meta: dict[str, MetaValue] = Field(description="host meta keys")
    turn: TurnSummary
    has_working_notes: bool


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


class TurnView(BaseModel):
    """Status of one turn."""

    turn_id: str
    session_id: str
    status: TurnStatus
    finished: bool
    error: str | None = None
    rounds: int = Field(description="model rounds settled so far")
    usage: Usage


class CancelView(BaseModel):
    """What a cancel request found or did."""

    turn_id: str
    status: TurnStatus
    cancel_requested: bool = Field(
        description="false when the turn had already ended (nothing changed)"
    )


class Delta(BaseModel):
    """One coalesced piece of a streamed response."""

    type: Literal["text", "tool_call", "tool_args", "reasoning"]
    text: str | None = None
    index: int | None = None
    id: str | None = None
    name: str | None = None


class Event(BaseModel):
    """One event of a turn, numbered by the session's global sequence.

    `frame`: provisional streamed deltas of response `response_id` (the running round).
    `entry`: a settled transcript entry; an assistant entry with id == `response_id` supersedes
    the frames of that response. `approval_requested` / `approval_decided`: a call waiting
    for a person (`call_id`, `tool`, `arguments`) and the decision (`decision`, `reason`,
    `arguments` as edited).
    """

    seq: int
    kind: Literal["frame", "entry", "approval_requested", "approval_decided"]
    response_id: str | None = None
    round: int | None = None
    # frame fields
    deltas: list[Delta] | None = None
    text: str | None = Field(default=None, description="frame: the text deltas joined")
    offset: int | None = Field(
        default=None,
        description="frame: characters (code points) of the response's text before `text`",
    )
    final: bool | None = Field(default=None, description="frame: the round's last frame")
    # entry fields
    entry_id: str | None = None
    parent_id: str | None = None
    role: str | None = None
    parts: list[dict[str, Any]] | None = None
    interrupted: bool | None = None
    call_id: str | None = None
    stop_reason: str | None = None
    # approval fields (docs/approvals.md)
    tool: str | None = None
    arguments: Any = None
    decision: str | None = None
    reason: str | None = None


class EventsPage(BaseModel):
    """A page of a turn's events after `cursor`; poll again with `next_cursor`."""

    turn_id: str
    status: TurnStatus
    events: list[Event]
    next_cursor: int = Field(description="the last seq returned (or the cursor sent)")
    finished: bool = Field(description="true once the turn ended and every event was returned")


class TranscriptPage(BaseModel):
    """Settled entries after `cursor`, in sequence order."""

    entries: list[Event]
    next_cursor: int
    has_more: bool


class NotesView(BaseModel):
    """The session's working notes (read-only here: the tools are the only writers)."""

    notes: str | None
    bytes: int
