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
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from turnkeep.harness.deps import HarnessLimits
from turnkeep.spend.budgets import Budgets


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
    """Where state lives, which model runs, and the turn caps (`limits`, declared once by
    `HarnessLimits` and read from the same TURNKEEP_ variables).

    Empty storage/envelope URLs mean "SQLite in the local data dir" (see `storage_url_or_local`).
    """

    model_config = ConfigDict(extra="ignore")
    ENV_PREFIX: ClassVar[str] = "TURNKEEP_"

    @model_validator(mode="before")
    @classmethod
    def _environment_under_arguments(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        own = {name: info for name, info in cls.model_fields.items() if name != "limits"}
        limit_fields = HarnessLimits.model_fields
        given = data.get("limits")
        if isinstance(given, HarnessLimits):
            given = given.model_dump(exclude_unset=True)
        limits = {
            **environment_values(limit_fields, cls.ENV_PREFIX, os.environ),
            **{name: value for name, value in data.items() if name in limit_fields},
            **(given or {}),
        }
        rest = {name: value for name, value in data.items() if name not in limit_fields}
        return {
            **environment_values(own, cls.ENV_PREFIX, os.environ),
            **rest,
            "limits": limits,
        }

    storage_url: str = Field(default="", description="open_storage URL; '' = local SQLite file")
    envelope_url: str = Field(default="", description="envelope store URL; '' = local SQLite file")
    agent: str = Field(
        default="", description="the Agent to run, package.module:attribute; '' = the demo agent"
    )
    model: str = Field(
        default="scripted",
        description="'scripted' | 'bedrock:<id>' | 'openai:…'; unset or '' = the agent's model",
    )
    ws_endpoint: str = Field(
        default="",
        description="the WebSocket API's management endpoint (https://<api>.execute-api."
        "<region>.amazonaws.com/<stage>): the steps push each turn's events to its subscribers "
        "(recorded in the table of TURNKEEP_ENVELOPE_URL); empty: no pushes",
    )
    limits: HarnessLimits = Field(
        default_factory=HarnessLimits,
        description="the turn caps and progress cadence (turnkeep.harness.HarnessLimits): each "
        "field is read from TURNKEEP_<FIELD> and may be given flat as a keyword",
    )
    local_dir: Path = Field(default=Path("./.local"), description="local data directory")
    budget_turn_tokens: int | None = Field(
        default=None, ge=1, description="deployment budget: tokens a turn may use (docs/usage.md)"
    )
    budget_turn_cost: Decimal | None = Field(
        default=None, gt=0, description="deployment budget: dollars a turn may spend"
    )
    budget_session_cost: Decimal | None = Field(
        default=None, gt=0, description="deployment budget: dollars a session may spend in all"
    )
    budget_user_daily_cost: Decimal | None = Field(
        default=None, gt=0, description="deployment budget: dollars a user may spend a UTC day"
    )
    budget_deployment_daily_cost: Decimal | None = Field(
        default=None,
        gt=0,
        description="deployment budget: dollars all users together may spend a UTC day (a kill "
        "switch)",
    )

    @field_validator(
        "budget_turn_tokens",
        "budget_turn_cost",
        "budget_session_cost",
        "budget_user_daily_cost",
        "budget_deployment_daily_cost",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # The template passes every parameter; an empty one is no budget.
        return None if isinstance(value, str) and not value.strip() else value

    def budgets(self) -> Budgets | None:
        """The deployment's budgets (TURNKEEP_BUDGET_*); None when none is set."""
        prefix = "budget_"
        given = {
            name.removeprefix(prefix): getattr(self, name)
            for name in type(self).model_fields
            if name.startswith(prefix) and getattr(self, name) is not None
        }
        return Budgets(**given) if given else None

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
