"""Per-container state of the Lambda handlers: the runtime (built once, on first use) and the
Powertools idempotency store in the one session table."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from turnkeep.aws_clients import shared_client
from turnkeep.runtime import Runtime, build_runtime
from turnkeep.settings import TurnkeepSettings

if TYPE_CHECKING:
    from turnkeep.lambda_idempotency import SessionKeyedPersistenceLayer

_LOCK = threading.Lock()
_RUNTIME: Runtime | None = None


def runtime() -> Runtime:
    """The container's runtime, built from the environment on first use (not at import, so a
    cold start pays only for what the first invocation needs)."""
    global _RUNTIME  # noqa: PLW0603 - one runtime per Lambda container, by design
    with _LOCK:
        if _RUNTIME is None:
            _RUNTIME = build_runtime(TurnkeepSettings())
        return _RUNTIME


def reset_runtime() -> None:
    """Drop the cached runtime (tests, or after the environment changed)."""
    global _RUNTIME  # noqa: PLW0603
    with _LOCK:
        if _RUNTIME is not None:
            _RUNTIME.close()
        _RUNTIME = None


def install_runtime(runtime: Runtime | None) -> Runtime | None:
    """Make `runtime` the container's runtime (None: build from the environment on next use);
    returns the one it replaces, unclosed. For tests that run the handlers on prepared deps."""
    global _RUNTIME
    with _LOCK:
        previous, _RUNTIME = _RUNTIME, runtime
        return previous


def idempotency_store(function: str) -> SessionKeyedPersistenceLayer:
    """Powertools idempotency records in the session table (`TURNKEEP_TABLE`), one partition
    per (step, session) — `IDEMPOTENCY#<function>#<session id>` — expiring through the table's
    TTL attribute."""
    from turnkeep.lambda_idempotency import SessionKeyedPersistenceLayer

    return SessionKeyedPersistenceLayer(
        function,
        table_name=os.environ["TURNKEEP_TABLE"],
        expiry_attr="expiresAt",
        boto3_client=shared_client("dynamodb"),
    )
