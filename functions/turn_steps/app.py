"""Lambda handlers of the turn state machine's tasks: one model round, one tool call, and the
two terminal steps. Each parses its task payload, runs the harness step, returns a small dict.

Deliveries are deduplicated by Powertools idempotency (records in the session table), on top of
the harness steps' own storage-level idempotency: a concurrent duplicate delivery waits instead
of calling the model or the tool a second time.
"""

from __future__ import annotations

import gc

# What the imports below build (modules, models, the AWS clients) lives as long as the
# container: collections during them would find next to no garbage. Enabled again, after
# a freeze, at the end of this module.
gc.disable()

from collections.abc import Callable
from typing import Any, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent
from aws_lambda_powertools.utilities.typing import LambdaContext

from turnkeep.lambda_runtime import idempotency_store, runtime
from turnkeep.lambda_tracing import lambda_tracer
from turnkeep.step_events import (
    StepEventError,
    StepName,
    idempotency_key_expression,
    run_step,
)

# The service name is the template's POWERTOOLS_SERVICE_NAME: not overridden here.
logger = Logger()
tracer = lambda_tracer()  # X-Ray SDK only when tracing is enabled
metrics = Metrics(namespace="turnkeep")

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def _handler(step: StepName) -> Handler:
    config = IdempotencyConfig(
        event_key_jmespath=idempotency_key_expression(step),
        raise_on_no_idempotency_key=True,
    )

    def run(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        return run_step(step, runtime().deps, event)

    # Idempotency records are keyed by the function's qualified name: give each step its own.
    run.__name__ = run.__qualname__ = step
    run_once = idempotent(persistence_store=idempotency_store(step), config=config)(run)

    @logger.inject_lambda_context(log_event=False)
    @tracer.capture_lambda_handler(capture_response=False)
    @metrics.log_metrics
    def handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        if not isinstance(event, dict):  # a wiring bug: never retried, never keyed
            raise StepEventError(
                f"{step} expects a JSON object payload, got {type(event).__name__}"
            )
        logger.append_keys(step=step, session_id=event.get("session_id"), op=event.get("op_id"))
        # Counted before deduplication: a redelivery shows up as an invocation served from the
        # idempotency record.
        metrics.add_metric(name=f"{step}_invocations", unit=MetricUnit.Count, value=1)
        return cast(dict[str, Any], run_once(event, context))

    return cast(Handler, handle)


model_step = _handler("model_step")
_tool_step = _handler("tool_step")
_approval_wait = _handler("approval_wait")


def tool_step(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One tool call; with a `task_token` (the state machine's `.waitForTaskToken` on this
    function) the hold of an approval wait instead (docs/approvals.md)."""
    if isinstance(event, dict) and "task_token" in event:
        return _approval_wait(event, context)
    return _tool_step(event, context)


finish_turn = _handler("finish_turn")
fail_turn = _handler("fail_turn")

# Frozen, what the imports built is left out of every later collection (the first
# invocation's included), which walks only what the invocations allocate.
gc.freeze()
gc.enable()
