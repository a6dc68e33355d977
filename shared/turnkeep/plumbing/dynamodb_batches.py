"""DynamoDB batch reads and writes, chunked to the service's limits, with the work a call
leaves unprocessed (throttling) asked again with backoff, a bounded number of times.

One helper for the storage backend and the envelope store (docs/aws-storage.md, "Reads and
caching"); compare-and-set retries stay with the domain code that owns them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

BATCH_GET_MAX = 100
"""Keys per BatchGetItem call (the service's limit)."""
BATCH_WRITE_MAX = 25
"""Put/delete requests per BatchWriteItem call (the service's limit)."""
ATTEMPTS = 8
"""Calls per chunk before its unprocessed work is given up (backoff ≈ 3.5 s in all)."""

Item = dict[str, Any]


class UnprocessedError(Exception):
    """DynamoDB still returned unprocessed work after every attempt; nothing is known of it."""


def backoff_seconds(attempt: int) -> float:
    """The pause after the `attempt`-th (0-based) call that left work unprocessed."""
    return min(1.0, 0.05 * 2.0**attempt)


def batch_get(
    client: Any,
    table: str,
    keys: Sequence[Mapping[str, Any]],
    *,
    attempts: int = ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Item]:
    """The items of `table` at `keys` (strongly consistent; absent keys are left out).

    Raises UnprocessedError when a chunk's keys stay unprocessed after `attempts` calls."""
    found: list[Item] = []

    def ask(request: dict[str, Any]) -> dict[str, Any]:
        page = client.batch_get_item(RequestItems=request)
        found.extend(page.get("Responses", {}).get(table, []))
        return dict(page.get("UnprocessedKeys") or {})

    for start in range(0, len(keys), BATCH_GET_MAX):
        chunk = {table: {"Keys": list(keys[start : start + BATCH_GET_MAX]), "ConsistentRead": True}}
        _drain(ask, chunk, "BatchGetItem", attempts, sleep)
    return found


def batch_write(
    client: Any,
    table: str,
    requests: Sequence[Mapping[str, Any]],
    *,
    attempts: int = ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Apply `requests` (`{"PutRequest": …}` / `{"DeleteRequest": …}`) to `table`, in order of
    chunks. Raises UnprocessedError when a chunk's requests stay unprocessed after `attempts`."""

    def ask(request: dict[str, Any]) -> dict[str, Any]:
        return dict(client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {})

    for start in range(0, len(requests), BATCH_WRITE_MAX):
        _drain(
            ask,
            {table: list(requests[start : start + BATCH_WRITE_MAX])},
            "BatchWriteItem",
            attempts,
            sleep,
        )


def _drain(
    ask: Callable[[dict[str, Any]], dict[str, Any]],
    pending: dict[str, Any],
    operation: str,
    attempts: int,
    sleep: Callable[[float], None],
) -> None:
    for attempt in range(attempts):
        pending = ask(pending)
        if not pending:
            return
        if attempt + 1 < attempts:
            sleep(backoff_seconds(attempt))
    raise UnprocessedError(
        f"DynamoDB {operation} left work unprocessed after {attempts} attempts (throttled)"
    )
