"""Process settings from the environment (prefix ``TURNKEEP_``), with local-mode defaults.

`TurnkeepSettings` is read from the environment the way a pydantic-settings class with that
prefix is (names case-insensitive, keyword arguments win, unknown names ignored), but it is a
plain pydantic model: every Lambda handler builds it on a cold start, and importing
pydantic-settings (which imports asyncio and dotenv) cost the step handler about 30 ms of it
(docs/step-functions.md, "Cold start"). `ApiSettings`, read only by the API, stays one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


def environment_values(
    fields: Mapping[str, object], prefix: str, environ: Mapping[str, str]
) -> dict[str, str]:
    """The variables `prefix + field` (any case) of `environ`, by field name."""
    by_name = {name.lower(): text for name, text in environ.items()}
    found: dict[str, str] = {}
    for field in fields:
        text = by_name.get((prefix + field).lower())
        if text is not None:
            found[field] = text
    return found


class TurnkeepSettings(BaseModel):
    """Where state lives, which model runs, and the turn caps.

    Empty storage/envelope URLs mean "SQLite in the local data dir" (see `storage_url_or_local`).
    """

    model_config = ConfigDict(extra="ignore")
    ENV_PREFIX: ClassVar[str] = "TURNKEEP_"

    @model_validator(mode="before")
    @classmethod
    def _environment_under_arguments(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return {**environment_values(cls.model_fields, cls.ENV_PREFIX, os.environ), **data}

    storage_url: str = Field(default="", description="open_storage URL; '' = local SQLite file")
    envelope_url: str = Field(default="", description="envelope store URL; '' = local SQLite file")
    agent: str = Field(
        default="", description="the Agent to run, package.module:attribute; '' = the demo agent"
    )
    model: str = Field(
        default="scripted",
        description="'scripted' | 'bedrock:<id>' | 'openai:…'; unset or '' = the agent's model",
    )
    max_steps: int = Field(default=16, ge=1, le=1000, description="model rounds per turn")
    wall_clock_seconds: float = Field(default=300.0, gt=0, description="turn deadline")
    frame_interval_ms: int = Field(
        default=2000, ge=0, description="recovery frames: at most one persisted per interval"
    )
    frame_max_bytes: int = Field(
        default=16384, ge=1, description="recovery frames: persisted early at this much text"
    )
    live_interval_ms: int = Field(
        default=100, ge=0, le=1000, description="live deltas to watchers: one per interval"
    )
    ws_endpoint: str = Field(
        default="",
        description="the WebSocket API's management endpoint (https://<api>.execute-api."
        "<region>.amazonaws.com/<stage>): the steps push each turn's events to its subscribers "
        "(recorded in the table of TURNKEEP_ENVELOPE_URL); empty: no pushes",
    )
    approval_timeout_seconds: float = Field(
        default=86400.0, gt=0, description="an approval nobody decides is denied after this"
    )
    workflow_type: Literal["STANDARD", "EXPRESS"] = Field(
        default="STANDARD", description="the template's workflow type (approvals need STANDARD)"
    )
    tool_lease_seconds: float = Field(
        default=0.0,
        ge=0,
        description="how long a started tool call counts as running in another delivery: the "
        "tool step's function timeout on Lambda; 0 locally (deliveries never overlap)",
    )
    context_strategy: Literal["compaction", "window"] = Field(
        default="compaction", description="how a round that outgrows the model's budget shrinks"
    )
    context_threshold: float = Field(
        default=0.8, gt=0, le=1, description="share of the input budget that triggers it"
    )
    context_keep: float = Field(
        default=0.5, gt=0, le=1, description="share of the input budget kept right after it"
    )
    local_dir: Path = Field(default=Path("./.local"), description="local data directory")

    def local_db_url(self) -> str:
        """`sqlite:///<abs local_dir>/turnkeep.db` (the directory is not created here)."""
        return f"sqlite:///{self.local_dir.resolve() / 'turnkeep.db'}"

    def storage_url_or_local(self) -> str:
        """The storage URL, defaulting to the local SQLite file."""
        return self.storage_url or self.local_db_url()

    def envelope_url_or_local(self) -> str:
        """The envelope URL, defaulting to the local SQLite file."""
        return self.envelope_url or self.local_db_url()


def model_is_set(settings: TurnkeepSettings) -> bool:
    """Whether TURNKEEP_MODEL (or --model) names a model, rather than leaving the agent's."""
    return "model" in settings.model_fields_set and bool(settings.model.strip())


def local_settings(
    *,
    storage: str | None = None,
    envelope: str | None = None,
    model: str | None = None,
    agent: str | None = None,
) -> TurnkeepSettings:
    """Settings from the environment with command-line flags on top, the agent loaded and the
    model spec (TURNKEEP_MODEL / --model, else the agent's) checked.

    Raises ConfigError (one line naming the variable or flag) for any value not accepted.
    """
    from turnkeep.runtime.agent_settings import with_agent
    from turnkeep.runtime.config_errors import check_model_spec, load_settings

    settings = load_settings(TurnkeepSettings)
    update: dict[str, str] = {}
    if storage is not None:
        update["storage_url"] = storage
    if envelope is not None:
        update["envelope_url"] = envelope
    if model is not None:
        update["model"] = model
    if agent is not None:
        update["agent"] = agent
    settings = settings.model_copy(update=update)
    explicit = model_is_set(settings)
    settings, loaded = with_agent(settings, source="--agent" if agent is not None else None)
    if explicit:
        check_model_spec(settings.model, "--model" if model is not None else "TURNKEEP_MODEL")
    else:
        check_model_spec(settings.model, f"the model of agent {loaded.name!r}")
    for spec in loaded.allowed_models:
        check_model_spec(spec, f"the allowed_models of agent {loaded.name!r}")
    return settings
