"""Lambda handlers of the WebSocket API (docs/api.md, "WebSocket API"): `routes` answers the
`subscribe`, `$default` and `$disconnect` routes; `authorize_connect` is the `$connect` REQUEST
authorizer: the same JWT as the HTTP API in the `Authorization` header (TURNKEEP_JWT_ISSUER,
TURNKEEP_JWT_AUDIENCE, the issuer's JWKS at TURNKEEP_JWKS_URL, fetched once per container), or a
single-use `?ticket=` of `POST /live/tickets`, redeemed in the table of TURNKEEP_ENVELOPE_URL.
`$connect` itself has no function (a MOCK integration): a watcher costs the authorizer and its
`subscribe`.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from turnkeep.aws_lambda.container import runtime
from turnkeep.live.authorizer import JwksCache, JwtVerifier, Unauthorized, authorize
from turnkeep.live.connections import Connections
from turnkeep.live.push import LazyClient, envelope_table, table_client
from turnkeep.live.tickets import TicketStore
from turnkeep.live.websocket import WebSocketRoutes

logger = Logger()


@functools.cache
def _routes() -> WebSocketRoutes:
    deps_runtime = runtime()
    table = envelope_table(deps_runtime.settings.envelope_url_or_local())
    endpoint = deps_runtime.settings.ws_endpoint
    return WebSocketRoutes(
        deps_runtime.deps,
        Connections(table_client(table), table.table),
        LazyClient("apigatewaymanagementapi", endpoint),
    )


@functools.cache
def _verifier() -> JwtVerifier:
    issuer = os.environ["TURNKEEP_JWT_ISSUER"]
    jwks_url = os.environ.get("TURNKEEP_JWKS_URL") or issuer.rstrip("/") + "/.well-known/jwks.json"
    return JwtVerifier(issuer, os.environ["TURNKEEP_JWT_AUDIENCE"], JwksCache(jwks_url))


@functools.cache
def _tickets() -> TicketStore:
    # The envelope URL alone, not the runtime: the authorizer loads no agent or harness.
    table = envelope_table(os.environ["TURNKEEP_ENVELOPE_URL"])
    return TicketStore(table.client(), table.table)


@logger.inject_lambda_context(log_event=False)
def routes(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One WebSocket message or disconnect."""
    return _routes().handle(event)


def authorize_connect(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """`$connect`: an Allow policy for a valid bearer token or ticket; `Unauthorized` (401)
    otherwise."""
    try:
        return authorize(event, _verifier(), _tickets())
    except Unauthorized as refused:
        logger.info("websocket connection refused: %s", refused.reason)
        raise
