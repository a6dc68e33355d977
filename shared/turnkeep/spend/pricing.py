"""The price a provider's rounds are charged at, and a round's usage with its cost."""

from __future__ import annotations

from dataclasses import replace

from turnkeep.providers.base import ModelProvider, Usage
from turnkeep.providers.prices import FREE, Price, bedrock_price
from turnkeep.providers.settings import ModelSettings
from turnkeep.storage import UsageRow


def price_for(provider: ModelProvider, settings: ModelSettings | None = None) -> Price:
    """The turn's `price` setting, else the provider spec's `price=` option, else the table's
    row for a Bedrock model; zero for everything else (docs/usage.md, "Prices")."""
    if settings is not None and settings.price is not None:
        return settings.price_figures() or FREE
    spec = getattr(provider, "settings", None)
    if isinstance(spec, ModelSettings) and spec.price is not None:
        return spec.price_figures() or FREE
    model_id = getattr(provider, "model_id", None)
    if provider.name == "bedrock" and isinstance(model_id, str):
        return bedrock_price(model_id) or FREE
    return FREE


def priced(usage: Usage, price: Price) -> Usage:
    """`usage` with its cost at `price` (measured or estimated alike; `estimated` stays)."""
    return replace(usage, cost_micros=price.cost_micros(usage))


def usage_row(usage: Usage, model: str | None, op_id: str | None = None) -> UsageRow:
    """The storage row of a priced round (docs/storage.md, usage rows)."""
    return UsageRow(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cost_micros=usage.cost_micros,
        model=model or None,
        estimated=usage.estimated,
        op_id=op_id,
    )
