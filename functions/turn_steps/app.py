"""Lambda handlers of the turn state machine's tasks: one model round, one tool call, and the
two terminal steps. Each parses its task payload, runs the harness step, returns a small dict.

Deliveries are not deduplicated here (Powertools idempotency records did that until issue #15):
effects-once under a redelivery is the harness's storage fencing (docs/harness.md, "Recovery
and idempotency"). Every commit of a running turn is guarded by its operation state
(`fenced_commit`), so nothing lands after the terminal commit; a model round settles in one
commit under a deterministic entry id and a redelivery of a settled round answers from that
entry; a tool call is claimed by a compare-and-set on its state, so of two overlapping
deliveries one runs the tool and the other waits for its result (a holder that died is taken
over when its lease ends; found `started` after that, only a replay-safe tool runs again), and
a redelivery of a done call answers its stored result; `finish_turn`/`fail_turn` return the
existing record. A concurrent duplicate model step may call the model a second time: two
settlements of one round collide on its entry id; the loser commits nothing and raises
RetryableStepError, whose retry answers the settled round (docs/step-functions.md, "Express
workflows").
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
from aws_lambda_powertools.utilities.typing import LambdaContext

from turnkeep.aws_lambda.container import load_container_agent, runtime
from turnkeep.aws_lambda.step_events import StepEventError, StepName, run_step
from turnkeep.aws_lambda.tracing import lambda_tracer

# The agent (TURNKEEP_AGENT) is imported during init: a bad reference is the init error.
load_container_agent()

# The service name is the template's POWERTOOLS_SERVICE_NAME: not overridden here.
logger = Logger()
tracer = lambda_tracer()  # X-Ray SDK only when tracing is enabled
metrics = Metrics(namespace="turnkeep")

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def _handler(step: StepName) -> Handler:
    @logger.inject_lambda_context(log_event=False)
    @tracer.capture_lambda_handler(capture_response=False)
    @metrics.log_metrics
    def handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        if not isinstance(event, dict):  # a wiring bug: never retried
            raise StepEventError(
                f"{step} expects a JSON object payload, got {type(event).__name__}"
            )
        logger.append_keys(step=step, session_id=event.get("session_id"), op=event.get("op_id"))
        # Every delivery counts, a redelivery included.
        metrics.add_metric(name=f"{step}_invocations", unit=MetricUnit.Count, value=1)
        return run_step(step, runtime().deps, event)

    return cast(Handler, handle)  # the Powertools decorators are untyped


model_step = _handler("model_step")
_tool_step = _handler("tool_step")
_approval_wait = _handler("approval_wait")
_child_wait = _handler("child_wait")


def tool_step(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One tool call; with a `task_token` (the state machine's `.waitForTaskToken` on this
    function) the hold of an approval wait instead (docs/approvals.md), or with `child` too the
    start of a sub-agent's child turn (docs/step-functions.md, "Sub-agents")."""
    if isinstance(event, dict) and "task_token" in event:
        if event.get("child") is True:
            return _child_wait(event, context)
        return _approval_wait(event, context)
    return _tool_step(event, context)


finish_turn = _handler("finish_turn")
fail_turn = _handler("fail_turn")

# Frozen, what the imports built is left out of every later collection (the first
# invocation's included), which walks only what the invocations allocate.
gc.freeze()
gc.enable()
