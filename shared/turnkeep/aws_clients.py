"""Process-wide boto3 low-level clients, one per (service, region, endpoint).

Building a client costs ~0.25 s (endpoint and service-model loading) and clients are thread-safe,
so every caller of one process (storage, envelopes, Step Functions) shares them.
"""

from __future__ import annotations

import threading
from typing import Any

_CLIENTS: dict[tuple[str, str, str], Any] = {}
_LOCK = threading.Lock()


def shared_client(service: str, region: str = "", endpoint: str = "") -> Any:
    """The process's client of `service` ('' region/endpoint = the boto3 defaults)."""
    ident = (service, region, endpoint)
    with _LOCK:
        client = _CLIENTS.get(ident)
        if client is None:
            import boto3

            options: dict[str, Any] = {}
            if region:
                options["region_name"] = region
            if endpoint:
                options["endpoint_url"] = endpoint
            client = boto3.session.Session().client(service, **options)  # type: ignore[call-overload]
            _CLIENTS[ident] = client
        return client
