"""Operation state, per-call state, turn results, and the storage addresses they live at.

Session scope (durable, coordinated with entries in one transaction):
  value("turn.op", op)              OperationState while the turn runs (deleted at terminal)
  value("turn.call", f"{op}/{id}")  CallState of one tool call until it is settled as an entry
  value("turn.result", op)          TurnRecord written by the terminal commit (kept)
  value("turn.head")                id of the session's branch head entry
Round scope `ephemeral_scope(f"{response_id}.frames")` (retired by the round's settlement, or
by the terminal commit when the round never settled):
  value_list("turn.frames", response_id)   coalesced assistant frames of one model round
Operation scope `ephemeral_scope(op)` (progress, retired by the terminal commit):
  value("tool.checkpoint", call_id)        a tool's output checkpoint
  value("tool.memo", call_id)              a tool's memo
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from turnkeep.harness.errors import StepInputError
from turnkeep.providers.base import Usage
from turnkeep.storage import (
    EphemeralScope,
    Storage,
    Value,
    ValueList,
    ephemeral_scope,
    value,
    value_list,
)
from turnkeep.turn_rules import (
    TerminalStatus,
    op_id_problem,
)

OP_NS = "turn.op"
CALL_NS = "turn.call"
RESULT_NS = "turn.result"
HEAD_NS = "turn.head"
FRAMES_NS = "turn.frames"
CHECKPOINT_NS = "tool.checkpoint"
MEMO_NS = "tool.memo"
END_TAG = "end"


def validate_op_id(op_id: str) -> str:
    """Operation ids are 1-100 chars of [A-Za-z0-9._:-] (no '/': call keys are `op/call`)."""
    problem = op_id_problem(op_id)
    if problem is not None:
        raise StepInputError(problem)
    return op_id


class _Model(BaseModel):
    # Built on first use: a handler pays only for its step's models (docs/step-functions.md).
    model_config = ConfigDict(extra="forbid", defer_build=True)


class OperationState(_Model):
    """Everything a step needs to resume the turn; session-scoped, small."""

    op_id: str
    session_id: str
    user_id: str
    model: str | None = None
    model_settings: dict[str, Any] | None = None
    """The model settings the turn runs with (the agent's merged with the turn's), recorded at
    its start so a resumed turn keeps them; None: the agent's current ones."""
    round: int = 0
    """The next model round to run; rounds below it are settled entries."""
    started_at: float
    deadline_at: float
    user_entry_id: str
    pending_call_ids: list[str] = Field(default_factory=list)
    """Tool calls of the last settled response, in order, not yet settled as result entries."""
    pending_round: int | None = None
    wrap_up_done: bool = False
    interrupted_rounds: int = 0
    """Consecutive model rounds recorded as interrupted (reset by a complete response)."""
    usage: Usage = Field(default_factory=Usage)
    """The turn's usage, its sub-agents' child turns included."""
    subagent_usage: Usage = Field(default_factory=Usage)
    """The part of `usage` its sub-agents' child turns used (shown apart)."""
    last_entry_id: str | None = None
    trace_parent: str | None = None
    """The turn's W3C trace context, chosen at its start: every step's spans are children of
    the turn span it names, in whatever process runs them (docs/tracing.md)."""
    output_schema: dict[str, Any] | None = None
    """The turn's own `output_schema` (a JSON Schema) when its start passed one; None: the
    agent's `output_type`, if any (docs/agent.md, "Typed results")."""
    output_failures: int = 0
    """`final_result` submissions that did not validate so far (the turn fails
    `output_invalid` past the agent's `output_retries`)."""
    output: Any = None
    """The validated result once a `final_result` call was accepted (the turn then ends)."""
    force_final_result: bool = False
    """The last round replied with text only: the next one must call `final_result`."""
    output_errors: list[str] | None = None
    """The last submission's errors once the retries ran out (the turn fails `output_invalid`)."""


CallPhase = Literal["pending", "awaiting", "started", "done"]
"""`awaiting`: the call needs a person's approval and has no decision yet (docs/approvals.md)."""

ApprovalChoice = Literal["approve", "deny", "edit", "timeout"]


class ApprovalDecision(_Model):
    """What a person decided about one call (`timeout`: nobody did in time; denies)."""

    decision: ApprovalChoice
    reason: str | None = None
    arguments: str | None = None
    """`edit`: the arguments the call runs with (JSON text; the call keeps the model's)."""
    decided_by: str | None = None
    decided_at: float


class CallApproval(_Model):
    """The approval request of one call and, once made, its decision."""

    requested_at: float
    expires_at: float
    decision: ApprovalDecision | None = None


class ToolImageRef(_Model):
    """An image a tool returned, kept as an attachment of the session: the reference the
    result's transcript entry carries (docs/attachments.md, "Images from tools")."""

    attachment_id: str
    name: str
    media_type: str
    size: int = 0


class CallState(_Model):
    """One tool call: its arguments until settled, and its result once run."""

    call_id: str
    name: str
    arguments: str
    round: int
    phase: CallPhase = "pending"
    attempts: int = 0
    content: str | None = None
    is_error: bool = False
    attachments: list[ToolImageRef] = Field(default_factory=list)
    """Images the tool returned, stored as the session's attachments."""
    replayed: bool = False
    interrupted: bool = False
    approval: CallApproval | None = None
    started_at: float | None = None
    """When the delivery now running it claimed it (its lease: docs/harness.md)."""
    ended_at: float | None = None
    """When its run returned (with `started_at`, the call's bar in the turn's timeline)."""
    child: dict[str, Any] | None = None
    """A sub-agent call's child turn once it ended (`turnkeep.harness.subagents.ChildTurn`)."""


class TurnRecord(_Model):
    """The result of a finished turn, kept after the operation state is gone."""

    op_id: str
    status: TerminalStatus
    error: str | None = None
    error_code: str | None = None
    """A machine-readable reason for a failed turn (`output_invalid`), None otherwise."""
    final_entry_id: str | None = None
    rounds: int = 0
    usage: Usage = Field(default_factory=Usage)
    started_at: float | None = None
    """When the turn started (None: recorded before it was kept)."""
    subagent_usage: Usage = Field(default_factory=Usage)
    finished_at: float
    output: Any = None
    """A typed turn's validated result (a JSON value); None for a text turn or a failed one."""


# -- addresses ----------------------------------------------------------------------------------


def op_scope(op_id: str) -> EphemeralScope:
    """The ephemeral scope holding the operation's progress."""
    return ephemeral_scope(op_id)


def op_address(op_id: str) -> Value:
    """Session-scoped operation state."""
    return value(OP_NS, op_id)


def call_address(op_id: str, call_id: str) -> Value:
    """Session-scoped state of one tool call."""
    return value(CALL_NS, f"{op_id}/{call_id}")


def result_address(op_id: str) -> Value:
    """Session-scoped record of a finished turn."""
    return value(RESULT_NS, op_id)


def head_address() -> Value:
    """Session-scoped id of the branch head entry."""
    return value(HEAD_NS)


def frames_scope(response_id: str) -> EphemeralScope:
    """The ephemeral scope of one model round's frames, retired when the round settles.

    Its own scope, not the operation's: the terminal commit and the tool steps read the
    operation scope, and on AWS loading a scope fetches every object in it, so frames there
    cost one GetObject each at the turn's end (docs/aws-storage.md).
    """
    return ephemeral_scope(f"{response_id}.frames")


def frames_address(op_id: str, response_id: str) -> ValueList:
    """Assistant frames of one model round (`response_id` of `op_id`), in the round's scope."""
    return value_list(FRAMES_NS, response_id, frames_scope(response_id))


def checkpoint_address(op_id: str, call_id: str) -> Value:
    """A tool's output checkpoint, in the operation scope."""
    return value(CHECKPOINT_NS, call_id, op_scope(op_id))


def memo_address(op_id: str, call_id: str) -> Value:
    """A tool's memo, in the operation scope."""
    return value(MEMO_NS, call_id, op_scope(op_id))


# -- deterministic entry ids ---------------------------------------------------------------------


def user_entry_id(op_id: str) -> str:
    """The turn's user message entry."""
    return f"{op_id}:user"


def response_id(op_id: str, round_: int) -> str:
    """Assistant response of model round `round_` (also its frames key)."""
    return f"{op_id}:r{round_}"


def result_entry_id(op_id: str, round_: int, call_id: str) -> str:
    """Tool result entry of `call_id`, called in model round `round_`."""
    return f"{op_id}:r{round_}:{call_id}"


# -- loaders ------------------------------------------------------------------------------------


def load_state(storage: Storage, op_id: str) -> OperationState | None:
    """The running operation's state, or None once terminal (or never started)."""
    stored = storage.get_value(op_address(op_id))
    return None if stored is None else OperationState.model_validate(stored.value)


def load_call(storage: Storage, op_id: str, call_id: str) -> CallState | None:
    """State of one unsettled tool call, or None."""
    stored = storage.get_value(call_address(op_id, call_id))
    return None if stored is None else CallState.model_validate(stored.value)


def load_record(storage: Storage, op_id: str) -> TurnRecord | None:
    """The terminal record of a finished turn, or None."""
    stored = storage.get_value(result_address(op_id))
    return None if stored is None else TurnRecord.model_validate(stored.value)


def load_head(storage: Storage) -> str | None:
    """The session's branch head entry id, or None for an empty session."""
    stored = storage.get_value(head_address())
    return stored.value if stored is not None and isinstance(stored.value, str) else None
