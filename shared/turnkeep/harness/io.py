"""Step inputs and outputs: small JSON-able models (ids and counters, never transcripts)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from turnkeep.providers.base import Usage


class StepIO(BaseModel):
    """Base of every step payload (Step Functions passes them as JSON)."""

    # Built on first use: a handler pays only for its step's models (docs/step-functions.md).
    model_config = ConfigDict(extra="forbid", defer_build=True)

    session_id: str = Field(min_length=1, max_length=128)
    op_id: str = Field(min_length=1, max_length=100)


class AttachmentRef(BaseModel):
    """An attachment a turn's message names: the reference the transcript records (the bytes
    stay in the session's store, docs/attachments.md)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    attachment_id: str = Field(pattern=r"^att-[0-9a-f]{24}$")
    name: str = Field(min_length=1, max_length=255)
    media_type: str = Field(min_length=1, max_length=255)
    size: int = Field(ge=0)


class StartTurnInput(StepIO):
    """Start a turn: the user's message, the turn's model spec (None = default) and its model
    settings over the agent's (checked by `Agent.turn_model_settings`; None = the agent's),
    and its own result shape (`output_schema`, checked by `Agent.turn_output`)."""

    user_id: str = Field(min_length=1, max_length=256)
    text: str = Field(min_length=1)
    model: str | None = None
    model_settings: dict[str, Any] | None = None
    attachments: list[AttachmentRef] = Field(default_factory=list)
    """Checked and ready when the turn starts (the API resolves the ids)."""
    output_schema: dict[str, Any] | None = None


class StartTurnOutput(StepIO):
    """The turn is running; the first model round is `round`."""

    round: int = 0
    status: str


class ModelStepInput(StepIO):
    """Run model round `round` (the previous output's `next_round`)."""

    round: int = Field(ge=0)


NextAction = Literal["tools", "model", "finish", "fail", "done"]


class ModelStepOutput(StepIO):
    """What to do next: run `call_ids` (then model `next_round`), another round, end, or stop.

    `done` means the turn already ended (e.g. aborted by a cancel); `fail` carries `error` for
    `fail_turn`.
    """

    round: int
    next: NextAction
    next_round: int
    call_ids: list[str] = Field(default_factory=list)
    error: str | None = None
    status: str = "running"
    interrupted: bool = False
    wrap_up: bool = False


class ToolStepInput(StepIO):
    """Run one tool call of the current round.

    `approval`: `decided` after an approval wait ended, `timed_out` after it timed out (the
    call is then denied as timed out unless a decision landed first), `child_ended` after a
    sub-agent call's child execution ended (docs/step-functions.md, "Sub-agents").
    """

    call_id: str = Field(min_length=1)
    approval: Literal["none", "decided", "timed_out", "child_ended"] = "none"


class ToolStepOutput(StepIO):
    """Outcome of one tool call (its content stays in storage)."""

    call_id: str
    status: Literal["done", "skipped", "awaiting_approval", "child_turn"]
    is_error: bool = False
    replayed: bool = False
    interrupted: bool = False
    approval_timeout_seconds: int | None = None
    """`awaiting_approval`: whole seconds until the request times out (the wait's timeout)."""
    child_wait_seconds: int | None = None
    """`child_turn`: how long the execution waits for the sub-agent call's child turn (its
    own execution hands the wait its token back when it ends; then this step runs again with
    `approval=child_ended`)."""


class FinishTurnInput(StepIO):
    """End the turn as completed."""


class FailTurnInput(StepIO):
    """End the turn as failed (also the target of a Step Functions Catch)."""

    error: str = "the turn failed"


class TurnResult(StepIO):
    """The terminal outcome of a turn."""

    status: str
    error: str | None = None
    error_code: str | None = None
    """`output_invalid`: a typed turn's result stayed invalid past its retries."""
    final_entry_id: str | None = None
    rounds: int = 0
    usage: Usage = Field(default_factory=Usage)
    """Sub-agents' child turns included."""
    subagent_usage: Usage = Field(default_factory=Usage)
    """The part of `usage` the turn's sub-agents used."""
    output: Any = None
    """A typed turn's validated result (JSON; capped in size when it is validated)."""
    awaiting_call_ids: list[str] = Field(default_factory=list)
    """status `awaiting_approval` (a paused turn, not an end): the calls waiting for a person."""
    approval_wait_seconds: int | None = None
    """status `awaiting_approval`: seconds until the first of them times out."""


class CancelResult(StepIO):
    """What `cancel_turn` found or did (`wake_tokens`: approval waits to release)."""

    status: str
    wake_tokens: list[str] = Field(default_factory=list)
