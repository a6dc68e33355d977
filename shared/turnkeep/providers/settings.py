"""Model settings: what an agent (and, where allowed, a turn) asks of the model per round.

One shape for every provider (docs/providers.md, "Model settings"): each provider maps the fields
it knows onto its wire format (Bedrock `inferenceConfig` / `additionalModelRequestFields` /
`toolConfig.toolChoice` / `guardrailConfig` / `cachePoint`, Chat Completions body fields) and says
in its docs which it cannot honour. A provider spec's options parse into the same shape
(`settings_from_options`), so there is one syntax for them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from turnkeep.providers.prices import Price, parse_price


class GuardrailSettings(BaseModel):
    """An Amazon Bedrock guardrail applied to every round (`guardrailConfig`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    identifier: str = Field(min_length=1, description="guardrail id or ARN")
    version: str = Field(min_length=1, description="guardrail version, e.g. '1' or 'DRAFT'")
    trace: bool = False


class ModelSettings(BaseModel):
    """Sampling and request options of a model round; `None` = the provider's default."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    max_tokens: int | None = Field(default=None, ge=1, description="output token limit")
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    stop: tuple[str, ...] | None = Field(default=None, description="stop sequences")
    tool_choice: str | None = Field(
        default=None,
        description="'auto', 'required' (any tool), 'none', or the name of one tool",
    )
    extra: dict[str, Any] | None = Field(
        default=None,
        description="provider-specific request fields passed through as they are (Bedrock "
        "additionalModelRequestFields, extra Chat Completions body fields)",
    )
    prompt_cache: bool | None = Field(
        default=None,
        description="Bedrock cache points: None = on for the families that support them "
        "(Anthropic Claude, Amazon Nova), True = on for any model, False = off",
    )
    guardrail: GuardrailSettings | None = Field(
        default=None, description="Bedrock guardrail (guardrailConfig)"
    )
    reasoning_budget: int | None = Field(
        default=None,
        ge=1,
        description="extended-reasoning token budget (Claude on Bedrock: thinking.budget_tokens)",
    )

    price: str | None = Field(
        default=None,
        description="what a round costs: input,output[,cache_read[,cache_write]] dollars per "
        "million tokens, over the price table (docs/usage.md)",
    )

    @field_validator("price")
    @classmethod
    def _price_parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_price(value)
        return value

    def price_figures(self) -> Price | None:
        """The `price` setting parsed (None: not set)."""
        return None if self.price is None else parse_price(self.price)

    def merged(self, override: ModelSettings | None) -> ModelSettings:
        """These settings with every field `override` sets explicitly taking its value."""
        if override is None:
            return self
        return self.model_copy(update=override.model_dump(exclude_unset=True))


SETTING_OPTIONS = frozenset(
    {
        "max_tokens",
        "temperature",
        "top_p",
        "stop",
        "tool_choice",
        "extra",
        "prompt_cache",
        "guardrail",
        "reasoning_budget",
        "price",
    }
)
"""Spec options (`?name=value`) that are model settings; `stop` may be given more than once."""


def settings_from_options(options: Mapping[str, list[str]]) -> ModelSettings:
    """ModelSettings from a spec's setting options (each name -> its values, in order).

    `stop` takes every value given; `extra` is a JSON object; `guardrail` is `<id>:<version>`
    (the id may be an ARN, so the version follows the last colon); `prompt_cache` a boolean.
    ValueError with a one-line message naming the option when a value does not fit.
    """
    fields: dict[str, Any] = {}
    for name, values in options.items():
        if name not in SETTING_OPTIONS:
            continue
        if name != "stop" and len(values) > 1:
            raise ValueError(f"option {name!r} given twice")
        value = values[-1]
        if name == "stop":
            fields["stop"] = tuple(values)
        elif name == "extra":
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                raise ValueError(f"option extra={value!r} must be a JSON object")
            fields["extra"] = parsed
        elif name == "guardrail":
            identifier, colon, version = value.rpartition(":")
            if not colon or not identifier or not version:
                raise ValueError(f"option guardrail={value!r} must be <id>:<version>")
            fields["guardrail"] = {"identifier": identifier, "version": version}
        elif name == "prompt_cache":
            fields["prompt_cache"] = _boolean(name, value)
        else:
            fields[name] = value
    try:
        return ModelSettings.model_validate(fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise ValueError(f"option {where}: {error['msg']}") from exc


def _boolean(name: str, value: str) -> bool:
    lowered = value.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"option {name}={value!r} is not a boolean")
