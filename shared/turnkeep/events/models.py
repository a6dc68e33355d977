"""The event read models: a turn's status and events, transcript pages (pydantic; the HTTP
API's schema and the WebSocket messages use them as they are)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from turnkeep.providers.base import Usage
from turnkeep.turn_rules import TurnStatus as HarnessTurnStatus

CURSOR_MAX = 2**62
"""The largest cursor (a sequence number) a client may send: far above any sequence a session
reaches, and within every store's number range (DynamoDB refuses numbers of over 38 digits)."""

TurnStatus = Literal[HarnessTurnStatus, "deleting"]
"""A turn's status as the API shows it: the harness's, or `deleting` while its session goes."""


class TurnView(BaseModel):
    """Status of one turn."""

    turn_id: str
    session_id: str
    status: TurnStatus
    finished: bool
    error: str | None = None
    error_code: str | None = Field(
        default=None, description="`output_invalid`: a typed result stayed invalid"
    )
    rounds: int = Field(description="model rounds settled so far")
    usage: Usage = Field(description="the turn's usage, its sub-agents' child turns included")
    subagent_usage: Usage | None = Field(
        default=None,
        description="the part of `usage` its sub-agents' child turns used (null: none ran)",
    )
    output: Any = Field(
        default=None,
        description="a typed turn's validated result (JSON), once it completed (docs/agent.md)",
    )


class Delta(BaseModel):
    """One coalesced piece of a streamed response."""

    type: Literal["text", "tool_call", "tool_args", "reasoning"]
    text: str | None = None
    index: int | None = None
    id: str | None = None
    name: str | None = None


class NestedCall(BaseModel):
    """The sub-agent call a nested event's child turn runs under (docs/api.md, "Sub-agent
    events"); `depth` 1 is a call of the watched turn itself."""

    call_id: str
    agent: str
    session_id: str
    op_id: str
    depth: int


class Event(BaseModel):
    """One event of a turn, numbered by the session's global sequence.

    `frame`: provisional streamed deltas of response `response_id` (the running round).
    `entry`: a settled transcript entry; an assistant entry with id == `response_id` supersedes
    the frames of that response. `approval_requested` / `approval_decided`: a call waiting
    for a person (`call_id`, `tool`, `arguments`) and the decision (`decision`, `reason`,
    `arguments` as edited). `tool_source_unavailable`: from `round` on, the turn goes on
    without optional tool source `source`'s tools (`tools`: the ones left out; empty: all),
    `message` says why (docs/mcp.md, "Failures").
    """

    seq: int
    kind: Literal[
        "frame", "entry", "approval_requested", "approval_decided", "tool_source_unavailable"
    ]
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
    subagent: dict[str, Any] | None = Field(
        default=None,
        description="a sub-agent call's result: its child turn (`agent`, `session_id`, `op_id`, "
        "`status`, `usage`), whose own events are that session's (docs/agent.md); on an "
        "approval event, the child turn that asks (`agent`, `path`, `session_id`, `turn_id`, "
        "`call_id` of the parent's call; docs/approvals.md)",
    )
    nested: list[NestedCall] | None = Field(
        default=None,
        description="an event of a sub-agent's child turn: the calls it runs under, the "
        "watched turn's own call first (docs/api.md, 'Sub-agent events')",
    )
    # approval fields (docs/approvals.md)
    tool: str | None = None
    arguments: Any = None
    decision: str | None = None
    reason: str | None = None
    # tool_source_unavailable fields
    source: str | None = None
    message: str | None = None
    tools: list[str] | None = None


class EventsPage(BaseModel):
    """A page of a turn's events after `cursor`; poll again with `next_cursor`."""

    turn_id: str
    status: TurnStatus
    events: list[Event]
    next_cursor: int | str = Field(
        description="the last seq returned (or the cursor sent); once a sub-agent's child turn "
        "has events, `<seq>:<child>=<seq>,...` (pass it back as it is; docs/api.md)"
    )
    finished: bool = Field(description="true once the turn ended and every event was returned")
    error_code: str | None = Field(
        default=None, description="once finished: `output_invalid` when a typed result failed"
    )
    output: Any = Field(
        default=None, description="once finished: a typed turn's validated result (JSON)"
    )


class TranscriptPage(BaseModel):
    """Settled entries after `cursor`, in sequence order."""

    entries: list[Event]
    next_cursor: int
    has_more: bool
