"""Process-wide boto3 low-level clients, one per (service, region, endpoint), all from one session.

Clients are thread-safe and costly to build (service model, endpoint rules), so storage,
envelopes and the Lambda handlers of one process share them. They also share one boto3 session:
its loader parses botocore's data files (endpoints, partitions, the service list, retry and
default configuration) once per process instead of once per client.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3

_CLIENTS: dict[tuple[str, str, str], Any] = {}
_SESSION: boto3.session.Session | None = None
_LOCK = threading.Lock()


def _endpoint_key(endpoint: str) -> str:
    """`endpoint`, or '' when it is the endpoint boto3 would pick anyway (`AWS_ENDPOINT_URL`).

    Storage URLs fall back to `AWS_ENDPOINT_URL` explicitly, envelope URLs leave the endpoint
    to boto3, which reads the same variable: both get one client (one connection pool). Not
    when a per-service variable or AWS_IGNORE_CONFIGURED_ENDPOINT_URLS changes what boto3 picks.
    """
    if not endpoint or endpoint != os.environ.get("AWS_ENDPOINT_URL"):
        return endpoint
    if "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS" in os.environ or any(
        name.startswith("AWS_ENDPOINT_URL_") for name in os.environ
    ):
        return endpoint
    return ""


def shared_client(service: str, region: str = "", endpoint: str = "") -> Any:
    """The process's client of `service` ('' region/endpoint = the boto3 defaults)."""
    global _SESSION  # noqa: PLW0603 - one boto3 session per process, by design
    endpoint = _endpoint_key(endpoint)
    ident = (service, region, endpoint)
    with _LOCK:  # a boto3 session is not thread-safe: clients are created under the lock
        client = _CLIENTS.get(ident)
        if client is None:
            if _SESSION is None:
                import boto3

                _SESSION = boto3.session.Session()
            options: dict[str, Any] = {}
            if region:
                options["region_name"] = region
            if endpoint:
                options["endpoint_url"] = endpoint
            client = _SESSION.client(service, **options)  # type: ignore[call-overload]
            _CLIENTS[ident] = client
        return client
