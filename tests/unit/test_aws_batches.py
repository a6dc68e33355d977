"""DynamoDB batches: chunked to the service's limits, unprocessed work asked again with backoff,
a bounded number of times (moto never throttles, so a scripted client stands in for it)."""

from __future__ import annotations

from typing import Any

import pytest

from turnkeep.plumbing.dynamodb_batches import (
    ATTEMPTS,
    UnprocessedError,
    backoff_seconds,
    batch_get,
    batch_write,
)

TABLE = "t"


def key(n: int) -> dict[str, Any]:
    return {"pk": {"S": f"p{n}"}, "sk": {"S": "s"}}


class ThrottlingClient:
    """Answers each batch call, leaving the last `leave` keys/requests unprocessed on each of its
    first `throttled` calls; records every call's size."""

    def __init__(self, *, throttled: int = 0, leave: int = 1) -> None:
        self.throttled = throttled
        self.leave = leave
        self.sizes: list[int] = []

    def _split(self, work: list[Any]) -> tuple[list[Any], list[Any]]:
        self.sizes.append(len(work))
        if len(self.sizes) <= self.throttled:
            return work[: -self.leave], work[-self.leave :]
        return work, []

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        done, left = self._split(RequestItems[TABLE]["Keys"])
        unprocessed = {TABLE: {"Keys": left, "ConsistentRead": True}} if left else {}
        return {"Responses": {TABLE: done}, "UnprocessedKeys": unprocessed}

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        _done, left = self._split(RequestItems[TABLE])
        return {"UnprocessedItems": {TABLE: left} if left else {}}


def test_a_batch_get_is_chunked_to_100_keys_a_call_and_returns_every_item() -> None:
    client = ThrottlingClient()
    found = batch_get(client, TABLE, [key(n) for n in range(250)])
    assert client.sizes == [100, 100, 50]
    assert found == [key(n) for n in range(250)]


def test_a_batch_write_is_chunked_to_25_requests_a_call() -> None:
    client = ThrottlingClient()
    batch_write(client, TABLE, [{"DeleteRequest": {"Key": key(n)}} for n in range(60)])
    assert client.sizes == [25, 25, 10]


def test_unprocessed_keys_are_asked_again_after_a_growing_pause_until_none_are_left() -> None:
    client = ThrottlingClient(throttled=3)
    pauses: list[float] = []
    found = batch_get(client, TABLE, [key(n) for n in range(5)], sleep=pauses.append)
    assert client.sizes == [5, 1, 1, 1]
    assert sorted(item["pk"]["S"] for item in found) == [f"p{n}" for n in range(5)]
    assert pauses == [backoff_seconds(0), backoff_seconds(1), backoff_seconds(2)]
    assert pauses[0] < pauses[1] < pauses[2]


@pytest.mark.parametrize("operation", ["get", "write"])
def test_work_still_unprocessed_after_every_attempt_raises_instead_of_looping(
    operation: str,
) -> None:
    client = ThrottlingClient(throttled=10_000)
    pauses: list[float] = []

    def call() -> None:
        if operation == "get":
            batch_get(client, TABLE, [key(1), key(2)], sleep=pauses.append)
        else:
            batch_write(client, TABLE, [{"DeleteRequest": {"Key": key(1)}}], sleep=pauses.append)

    with pytest.raises(UnprocessedError, match="unprocessed after 8 attempts"):
        call()
    assert len(client.sizes) == ATTEMPTS
    assert len(pauses) == ATTEMPTS - 1
    assert max(pauses) <= 1.0
