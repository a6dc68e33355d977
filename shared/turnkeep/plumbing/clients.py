"""The process's one client cache: AWS clients, the model endpoints' HTTP clients and the MCP
servers' HTTP clients, each built once and shared.

Clients are thread-safe and costly to build (an AWS client's service model and endpoint rules,
an HTTP client's TLS context), and their pools keep connections for the next call, so every
user of a client asks this cache. AWS clients also share one botocore session: its loader
parses botocore's data files (endpoints, partitions, the service list, retry and default
configuration) once per process instead of once per client. The clients are botocore's, as
boto3's `Session.client` returns them (their user agent names botocore alone), without
importing boto3 and the s3transfer it brings: nothing here uses boto3's resources or S3
transfer methods.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import botocore.config
    import botocore.session

_Client = TypeVar("_Client")

_CLIENTS: dict[Hashable, Any] = {}
"""Process-wide clients by key; AWS clients by (service, region, endpoint[, config name])."""
_SCOPED: weakref.WeakKeyDictionary[Any, dict[Hashable, Any]] = weakref.WeakKeyDictionary()
"""Clients bound to an owner (an event loop), dropped with it."""
_SESSION: botocore.session.Session | None = None
_LOCK = threading.RLock()


def cached_client(
    key: Hashable,
    build: Callable[[], _Client],
    *,
    scope: object | None = None,
    usable: Callable[[_Client], bool] | None = None,
) -> _Client:
    """The client cached under `key` (in `scope`'s own space when given: an async client
    belongs to its event loop), built by `build` when there is none or `usable` rejects the
    cached one (a closed client, changed headers); a rejected client is replaced, not closed,
    since a call may still be using it."""
    with _LOCK:
        space = _CLIENTS if scope is None else _SCOPED.setdefault(scope, {})
        client: _Client | None = space.get(key)
        if client is None or (usable is not None and not usable(client)):
            client = space[key] = build()
        return client


def _endpoint(endpoint: str) -> str:
    """The endpoint a client gets: `endpoint`, else `AWS_ENDPOINT_URL` as boto3 would read it.

    Storage URLs fall back to `AWS_ENDPOINT_URL` explicitly, envelope URLs leave the endpoint
    to boto3, which reads the same variable: both get one client (one connection pool). '' (boto3
    decides) when a per-service variable or AWS_IGNORE_CONFIGURED_ENDPOINT_URLS changes that.
    These are the AWS SDK's variables, not turnkeep settings: read at call time, as boto3 does.
    """
    if endpoint:
        return endpoint
    if "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS" in os.environ or any(
        name.startswith("AWS_ENDPOINT_URL_") for name in os.environ
    ):
        return ""
    return os.environ.get("AWS_ENDPOINT_URL", "")


def shared_client(
    service: str,
    region: str = "",
    endpoint: str = "",
    *,
    config: tuple[str, botocore.config.Config] | None = None,
) -> Any:
    """The process's client of `service` ('' region/endpoint = the boto3 defaults); `config`
    (a name and a botocore Config) makes a client apart for users that need other retries or
    timeouts, shared by every user naming the same config."""
    endpoint = _endpoint(endpoint)
    key: tuple[str, ...] = (service, region, endpoint)
    if config is not None:
        key = (*key, config[0])

    def build() -> Any:
        global _SESSION  # noqa: PLW0603 - one botocore session per process, by design
        # A botocore session is not thread-safe: clients are created under the cache's lock.
        if _SESSION is None:
            import botocore.session

            _SESSION = botocore.session.get_session()
        return _SESSION.create_client(
            service,
            region_name=region or None,
            endpoint_url=endpoint or None,
            config=config[1] if config is not None else None,
        )

    return cached_client(key, build)
