"""CloudWatch metrics of spend, in the embedded metric format through Powertools: per charged
round, its tokens and cost under the dimension `model` (namespace `turnkeep`; docs/usage.md,
"Seeing it"). Printed to the function's log, which CloudWatch turns into metrics."""

from __future__ import annotations

from turnkeep.spend.ledger import Charge

NAMESPACE = "turnkeep"


def publish_charge(charge: Charge) -> None:
    """Emit one EMF document: InputTokens, OutputTokens, CacheReadTokens, CacheWriteTokens and
    CostMicros of the round, dimension `model`."""
    # Imported on the first charge: the steps that never charge never pay for it.
    from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

    metrics = EphemeralMetrics(namespace=NAMESPACE)
    metrics.add_dimension(name="model", value=charge.model or "unknown")
    usage = charge.usage
    for name, value in (
        ("InputTokens", usage.input_tokens),
        ("OutputTokens", usage.output_tokens),
        ("CacheReadTokens", usage.cache_read_tokens),
        ("CacheWriteTokens", usage.cache_write_tokens),
        ("CostMicros", usage.cost_micros),
    ):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    metrics.flush_metrics()
