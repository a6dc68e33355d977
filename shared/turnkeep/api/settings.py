"""Settings of the HTTP API (env prefix ``TURNKEEP_``), next to the harness's TurnkeepSettings."""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from turnkeep.attachments import BEDROCK_LIMITS, AttachmentLimits

MAX_MESSAGE_BYTES_DEFAULT = 32768


class ApiSettings(BaseSettings):
    """Request caps, the per-session turn-start rate limit, the model allow-list, launchers."""

    model_config = SettingsConfigDict(env_prefix="TURNKEEP_", extra="ignore")

    max_message_bytes: int = Field(
        default=MAX_MESSAGE_BYTES_DEFAULT,
        ge=1,
        le=1_048_576,
        description="cap on a user message (UTF-8 bytes); longer text is rejected, never cut",
    )
    max_body_bytes: int = Field(
        default=1_048_576, ge=1024, description="requests with a larger body are rejected (413)"
    )
    attachment_session_bytes: int = Field(
        default=BEDROCK_LIMITS.session_bytes,
        ge=1,
        description="cap on one session's attachments together (docs/attachments.md)",
    )
    turn_start_limit: int = Field(
        default=10, ge=1, description="turn starts allowed per session per rate window"
    )
    turn_start_window_seconds: float = Field(
        default=60.0, gt=0, description="length of the turn-start rate window"
    )
    allowed_models: list[str] = Field(
        default_factory=list,
        description="model specs a request may name besides the default (TURNKEEP_MODEL); "
        "a JSON list. Requests never choose arbitrary provider URLs or credentials.",
    )
    state_machine_arn: str = Field(
        default="", description="Step Functions state machine the Lambda launcher starts"
    )
    local_workers: int = Field(
        default=4, ge=1, le=64, description="threads of the local in-process orchestrator"
    )
    tool_workers: int = Field(
        default=2,
        ge=1,
        le=64,
        description="local server: worker processes that run tool calls (a hung or CPU-bound "
        "tool never stalls other sessions)",
    )
    tool_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="local server: a tool call running longer is stopped (tool error) and its "
        "worker process killed and replaced",
    )
    local_max_pending: int = Field(
        default=64,
        ge=1,
        description="turns the local orchestrator accepts at once (running+queued)",
    )
    stream_heartbeat_seconds: float = Field(
        default=15.0, gt=0, le=300, description="event stream: a `: ping` line this often"
    )
    stream_poll_seconds: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description="event stream: storage is read this often without a commit notice (a "
        "turn another process drives: `turnkeep chat` on the same file)",
    )
    live_url: str = Field(
        default="",
        pattern=r"^(wss?://[^\s?#]+)?$",
        description="the WebSocket API's client URL (wss://<api>.execute-api.<region>."
        "amazonaws.com/<stage>, the stack's WebSocketUrl): `GET /live` names it and "
        "`POST /live/tickets` issues tickets for it; empty: no WebSocket (follow the stream "
        "route or poll)",
    )


def attachment_limits_of(settings: ApiSettings) -> AttachmentLimits:
    """The attachment limits a deployment runs with: Bedrock's per attachment and per turn,
    the session cap from the settings."""
    return replace(BEDROCK_LIMITS, session_bytes=settings.attachment_session_bytes)
