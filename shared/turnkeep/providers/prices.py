"""Model prices and the cost of a round in integer micro-dollars (docs/usage.md, "Prices").

A price is micro-dollars per million tokens for input, output, cache reads and cache writes.
The table holds the Bedrock models turnkeep supports (on-demand, us-east-1, standard tier);
a spec's `price=` option or an agent's `ModelSettings.price` overrides it, and every other
provider (local servers, the scripted model) costs zero unless a price is set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # base imports the settings, which import this module
    from turnkeep.providers.base import Usage

MILLION: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """Micro-dollars per million tokens (so $3.00 / Mtok is 3_000_000)."""

    input: int
    output: int
    cache_read: int = 0
    cache_write: int = 0
    verified: bool = True
    """False for a table row whose figures were not checked against the pricing page."""

    def cost_micros(self, usage: Usage) -> int:
        """The cost of `usage` in micro-dollars, rounded up (a started micro-dollar counts)."""
        scaled = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        )
        return -(-scaled // MILLION)


FREE: Final = Price(0, 0, 0, 0)


def _usd(text: str) -> int:
    """'3.75' (dollars per million tokens) as micro-dollars per million tokens."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(f"price {text!r} is not a number of dollars") from None
    micros = value * MILLION
    if not value.is_finite() or value < 0 or micros != micros.to_integral_value():
        raise ValueError(f"price {text!r} must be >= 0 dollars with at most 6 decimals")
    return int(micros)


def parse_price(text: str) -> Price:
    """`input,output[,cache_read[,cache_write]]` in dollars per million tokens (the `price=`
    spec option). ValueError with a one-line message when it does not fit."""
    parts = text.split(",")
    if not 2 <= len(parts) <= 4:
        raise ValueError(
            f"price {text!r} must be input,output[,cache_read[,cache_write]] dollars per "
            "million tokens"
        )
    figures = [_usd(part) for part in parts] + [0] * (4 - len(parts))
    return Price(figures[0], figures[1], figures[2], figures[3])


def _row(
    pattern: str, input_: str, output: str, read: str, write: str, *, verified: bool = False
) -> tuple[re.Pattern[str], Price]:
    return re.compile(pattern), Price(_usd(input_), _usd(output), _usd(read), _usd(write), verified)


# First match wins, so the specific ids come before their family. Source and date of every row:
# docs/usage.md ("Prices"); rows marked unverified were not checked on the pricing page itself.
BEDROCK_PRICES: Final = (
    _row(r"anthropic\.claude-opus-4-[5-9]", "5", "25", "0.5", "6.25"),
    _row(r"anthropic\.claude-opus-4", "15", "75", "1.5", "18.75"),
    _row(r"anthropic\.claude-3-opus", "15", "75", "1.5", "18.75"),
    _row(r"anthropic\.claude-(sonnet-4|3-7-sonnet)", "3", "15", "0.3", "3.75"),
    _row(r"anthropic\.claude-3-5-sonnet", "3", "15", "0.3", "3.75"),
    _row(r"anthropic\.claude-3-sonnet", "3", "15", "0", "0"),
    _row(r"anthropic\.claude-haiku-4", "1", "5", "0.1", "1.25"),
    _row(r"anthropic\.claude-3-5-haiku", "0.8", "4", "0.08", "1"),
    _row(r"anthropic\.claude-3-haiku", "0.25", "1.25", "0", "0"),
    _row(r"amazon\.nova-micro", "0.035", "0.14", "0.00875", "0"),
    _row(r"amazon\.nova-lite", "0.06", "0.24", "0.015", "0"),
    _row(r"amazon\.nova-pro", "0.8", "3.2", "0.2", "0"),
    _row(r"amazon\.nova-premier", "2.5", "12.5", "0.625", "0"),
    _row(r"meta\.llama3-[123]-8b", "0.22", "0.22", "0", "0"),
    _row(r"meta\.llama3-[123]-70b", "0.72", "0.72", "0", "0"),
    _row(r"mistral\.mistral-large", "4", "12", "0", "0"),
)


def bedrock_price(model_id: str) -> Price | None:
    """The table's price of a Bedrock model id (inference profiles and ARNs included); None
    when the table does not know the model (its rounds then cost zero, docs/usage.md)."""
    for pattern, price in BEDROCK_PRICES:
        if pattern.search(model_id):
            return price
    return None
