"""Model settings: what an agent (and, where allowed, a turn) asks of the model per round.

One shape for every provider (docs/providers.md): each provider maps the fields it knows onto its
wire format (Bedrock `inferenceConfig` / `additionalModelRequestFields` / `toolConfig.toolChoice`
/ `guardrailConfig`, Chat Completions body fields) and says in its docs which it cannot honour.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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

    def merged(self, override: ModelSettings | None) -> ModelSettings:
        """These settings with every field `override` sets explicitly taking its value."""
        if override is None:
            return self
        return self.model_copy(update=override.model_dump(exclude_unset=True))
