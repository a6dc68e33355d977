"""Process-wide boto3 low-level clients, one per (service, region, endpoint), all from one session.

Clients are thread-safe and costly to build (service model, endpoint rules), so storage,
envelopes and the Lambda handlers of one process share them. They also share one boto3 session:
its loader parses botocore's data files (endpoints, partitions, the service list, retry and
default configuration) once per process instead of once per client.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3

_CLIENTS: dict[tuple[str, str, str], Any] = {}
_SESSION: boto3.session.Session | None = None
_LOCK = threading.Lock()


def shared_client(service: str, region: str = "", endpoint: str = "") -> Any:
    """The process's client of `service` ('' region/endpoint = the boto3 defaults)."""
    global _SESSION  # noqa: PLW0603 - one boto3 session per process, by design
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
