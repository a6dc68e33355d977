"""HTTP API Lambda: the turnkeep FastAPI app behind API Gateway (HTTP API, payload format 2.0).

Built once per container, on the first request, from the environment: TURNKEEP_STORAGE_URL,
TURNKEEP_ENVELOPE_URL (through `turnkeep.aws_lambda.container.runtime()`, shared with the
step handlers), TURNKEEP_STATE_MACHINE_ARN, plus TURNKEEP_MODEL / TURNKEEP_ALLOWED_MODELS and
the caps of `turnkeep.api.ApiSettings`. The caller is the JWT authorizer's `sub` claim (under
`sam local`, which runs no authorizer, also a dev token: `turnkeep.api.lambda_authenticator`);
each started turn becomes one Step Functions execution named by its operation id.
"""

from __future__ import annotations

import gc

# What the imports below build (modules, models, the AWS clients) lives as long as the
# container: collections during them would find next to no garbage. Enabled again, after
# a freeze, at the end of this module.
gc.disable()

import functools
from typing import Any, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from mangum import Mangum

from turnkeep.api import ApiSettings, StepFunctionsLauncher, create_app, lambda_authenticator
from turnkeep.aws_lambda.container import load_container_agent, runtime
from turnkeep.aws_lambda.tracing import lambda_tracer
from turnkeep.plumbing.clients import shared_client

# The agent (TURNKEEP_AGENT) is imported during init: a bad reference is the init error.
load_container_agent()

# The service name is the template's POWERTOOLS_SERVICE_NAME: not overridden here.
logger = Logger()
tracer = lambda_tracer()  # X-Ray SDK only when tracing is enabled
metrics = Metrics(namespace="turnkeep")


@functools.cache
def asgi_handler() -> Mangum:
    """The Mangum-wrapped app of this container (built on first use, not at import)."""
    import boto3
    import botocore

    # Which AWS SDK this container runs (the layer's pinned pair, not the runtime's boto3 beside
    # the layer's botocore): `make sam-local-test` checks this line.
    logger.info(
        "aws sdk",
        extra={
            "boto3": boto3.__version__,
            "botocore": botocore.__version__,
            "boto3_path": boto3.__file__,
            "botocore_path": botocore.__file__,
        },
    )
    settings = ApiSettings()
    # The Step Functions client is built on the first turn start, not for every cold container.
    launcher = StepFunctionsLauncher(
        None, settings.state_machine_arn, client_factory=lambda: shared_client("stepfunctions")
    )
    app = create_app(runtime(), launcher, lambda_authenticator(), settings=settings)
    return Mangum(app, lifespan="off")


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """API Gateway HTTP API event -> FastAPI -> HTTP response dict."""
    metrics.add_metric(name="ApiRequests", unit=MetricUnit.Count, value=1)
    # Mangum's own LambdaContext protocol differs from Powertools' in attribute mutability only.
    response: dict[str, Any] = asgi_handler()(event, cast(Any, context))
    if int(response.get("statusCode", 500)) >= 500:
        metrics.add_metric(name="ApiServerErrors", unit=MetricUnit.Count, value=1)
    return response


# Frozen, what the imports built is left out of every later collection (the first
# invocation's included), which walks only what the invocations allocate.
gc.freeze()
gc.enable()
