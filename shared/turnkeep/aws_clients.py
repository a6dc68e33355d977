"""Process-wide AWS low-level clients, one per (service, region, endpoint), all from one session.

Clients are thread-safe and costly to build (service model, endpoint rules), so storage,
envelopes, Step Functions and the Lambda handlers of one process share them. They also share one
botocore session: its loader parses botocore's data files (endpoints, partitions, the service
list, retry and default configuration) once per process instead of once per client. The clients
are botocore's, as boto3's `Session.client` returns them (their user agent names botocore alone),
without importing boto3 and the s3transfer it brings: nothing here uses boto3's resources or S3
transfer methods.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import botocore.session

_CLIENTS: dict[tuple[str, str, str], Any] = {}
_SESSION: botocore.session.Session | None = None
_LOCK = threading.Lock()


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


def shared_client(service: str, region: str = "", endpoint: str = "") -> Any:
    """The process's client of `service` ('' region/endpoint = the boto3 defaults)."""
    global _SESSION  # noqa: PLW0603 - one botocore session per process, by design
    endpoint = _endpoint(endpoint)
    ident = (service, region, endpoint)
    with _LOCK:  # a botocore session is not thread-safe: clients are created under the lock
        client = _CLIENTS.get(ident)
        if client is None:
            if _SESSION is None:
                import botocore.session

                _SESSION = botocore.session.get_session()
            client = _SESSION.create_client(
                service, region_name=region or None, endpoint_url=endpoint or None
            )
            _CLIENTS[ident] = client
        return client
