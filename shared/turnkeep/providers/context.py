"""A model's context window: how many tokens a request may use, and what a round keeps free for
the reply. Defaults per provider family are the table in docs/providers.md."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """`tokens` of context; `output_reserve` of them are kept free for the reply."""

    tokens: int
    output_reserve: int

    def __post_init__(self) -> None:
        if self.tokens < 1 or self.output_reserve < 0:
            raise ValueError(f"context window must have tokens >= 1 and reserve >= 0: {self}")
        if self.output_reserve >= self.tokens:
            raise ValueError(
                f"the output reserve ({self.output_reserve} tokens) must be smaller than the "
                f"context ({self.tokens} tokens)"
            )

    @property
    def input_budget(self) -> int:
        """Tokens a request (system prompt, tools and messages) may use."""
        return self.tokens - self.output_reserve


SCRIPTED_CONTEXT: Final = ContextWindow(128_000, 1_024)
DEFAULT_OUTPUT_RESERVE: Final = 4_096

# (pattern on the model id / name, context tokens), first match wins. Conservative where a
# family has members of several sizes: a smaller budget compacts earlier, a larger one fails.
_BEDROCK_CONTEXT: Final = (
    (re.compile(r"anthropic\.claude"), 200_000),
    (re.compile(r"amazon\.nova-micro"), 128_000),
    (re.compile(r"amazon\.nova"), 300_000),
    (re.compile(r"meta\.llama3-[123]"), 128_000),
    (re.compile(r"meta\.llama"), 8_192),
    (re.compile(r"mistral\.(mistral-large|pixtral)"), 128_000),
    (re.compile(r"mistral\."), 32_000),
    (re.compile(r"cohere\.command-r"), 128_000),
    (re.compile(r"ai21\.jamba"), 256_000),
)
_BEDROCK_FALLBACK: Final = 32_000
_OPENAI_CONTEXT: Final = (
    (re.compile(r"^(gpt-4o|gpt-4\.1|gpt-5|o[1-9])"), 128_000),
    (re.compile(r"^gpt-4-turbo"), 128_000),
    (re.compile(r"^gpt-3\.5"), 16_385),
)
# Local servers (Ollama's default num_ctx, small vLLM deployments) often run far below the
# model's nominal window, and Ollama cuts an over-long prompt silently: assume little.
_OPENAI_FALLBACK: Final = 8_192


def _lookup(table: tuple[tuple[re.Pattern[str], int], ...], name: str, fallback: int) -> int:
    for pattern, tokens in table:
        if pattern.search(name):
            return tokens
    return fallback


def bedrock_context_tokens(model_id: str) -> int:
    """The default context of a Bedrock model id (inference profiles and ARNs included)."""
    return _lookup(_BEDROCK_CONTEXT, model_id, _BEDROCK_FALLBACK)


def openai_context_tokens(model: str) -> int:
    """The default context of a Chat Completions model name."""
    return _lookup(_OPENAI_CONTEXT, model, _OPENAI_FALLBACK)


def context_window(
    *,
    tokens: int,
    reserve: int | None,
    max_tokens: int | None,
    default_reserve: int = DEFAULT_OUTPUT_RESERVE,
) -> ContextWindow:
    """The window of a spec: the reserve defaults to the reply cap (`max_tokens`), else to
    `default_reserve` but at most a quarter of the context. ValueError when it does not fit."""
    if reserve is None:
        reserve = max_tokens if max_tokens is not None else min(default_reserve, tokens // 4)
    return ContextWindow(tokens, reserve)
