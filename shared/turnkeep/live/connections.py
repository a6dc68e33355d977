"""WebSocket subscriptions on the session table (docs/api.md, "WebSocket API").

A subscription of connection `c` to turn `op` of session `s` is two items, written together:
- `pk = SESSION#s, sk = LIVE#op#c` (`conn`, `user`, `after`: the cursor it subscribed with), in
  the session's own partition, so a step finds a turn's watchers with one Query of it;
- `pk = LIVECONN#c, sk = LIVE#s#op`, the connection's back-reference, so `$disconnect` (which
  knows only the connection id) finds what to remove.
Both carry `expiresAt` (the table's TTL attribute): a connection API Gateway dropped without a
`$disconnect` is gone after `ttl_seconds` (API Gateway ends every connection within 2 hours).
The session's envelope item carries the watch mark (`turnkeep.live.marks`): a subscribe marks
its turn after recording the subscription, so a step that sees the mark finds the subscription.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

from turnkeep.envelope.dynamodb import ENVELOPE_SK
from turnkeep.live.marks import GEN, OPS, Mark
from turnkeep.plumbing.dynamodb_batches import batch_write

LIVE_PREFIX: Final = "LIVE#"
CONNECTION_PK_PREFIX: Final = "LIVECONN#"
DEFAULT_TTL_SECONDS: Final = 7200
"""API Gateway's maximum WebSocket connection duration."""


@dataclass(frozen=True, slots=True)
class Subscriber:
    """One connection watching a turn, and the cursor it subscribed with."""

    connection_id: str
    user_id: str
    after: int


def _s(text: str) -> dict[str, str]:
    return {"S": text}


def _n(number: int) -> dict[str, str]:
    return {"N": str(number)}


def _code(exc: Exception) -> object:
    return getattr(exc, "response", {}).get("Error", {}).get("Code")


@dataclass(frozen=True)
class Connections:
    """The subscription items of one table (`client`: a DynamoDB client)."""

    client: Any
    table: str
    ttl_seconds: int = DEFAULT_TTL_SECONDS

    def subscribe(
        self, session_id: str, op_id: str, connection_id: str, user_id: str, after: int
    ) -> None:
        """Record the subscription (one BatchWriteItem of its two items)."""
        items = self._subscription(session_id, op_id, connection_id, user_id, after)
        batch_write(self.client, self.table, [{"PutRequest": {"Item": i}} for i in items])

    def subscribe_marked(
        self, session_id: str, op_id: str, connection_id: str, user_id: str, after: int
    ) -> bool:
        """Record the subscription and mark its turn (`mark`) in one TransactWriteItems, so a
        step that sees the mark finds the subscription; False (nothing written) when the
        session has no envelope."""
        items = self._subscription(session_id, op_id, connection_id, user_id, after)
        try:
            self.client.transact_write_items(
                TransactItems=[
                    *({"Put": {"TableName": self.table, "Item": i}} for i in items),
                    {"Update": {"TableName": self.table, **self._mark_update(session_id, op_id)}},
                ]
            )
        except Exception as exc:
            if _code(exc) == "TransactionCanceledException":
                return False
            raise
        return True

    def _subscription(
        self, session_id: str, op_id: str, connection_id: str, user_id: str, after: int
    ) -> list[dict[str, Any]]:
        expires = _n(int(time.time()) + self.ttl_seconds)
        return [
            {
                "pk": _s(f"SESSION#{session_id}"),
                "sk": _s(f"{LIVE_PREFIX}{op_id}#{connection_id}"),
                "conn": _s(connection_id),
                "user": _s(user_id),
                "after": _n(after),
                "expiresAt": expires,
            },
            {
                "pk": _s(f"{CONNECTION_PK_PREFIX}{connection_id}"),
                "sk": _s(f"{LIVE_PREFIX}{session_id}#{op_id}"),
                "session": _s(session_id),
                "op": _s(op_id),
                "expiresAt": expires,
            },
        ]

    def _mark_update(self, session_id: str, op_id: str) -> dict[str, Any]:
        return {
            "Key": self._envelope(session_id),
            "UpdateExpression": "ADD #gen :one, #ops :op",
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeNames": {"#gen": GEN, "#ops": OPS},
            "ExpressionAttributeValues": {":one": _n(1), ":op": {"SS": [op_id]}},
        }

    def read_mark(self, session_id: str) -> Mark:
        """The session's watch mark now (one strongly consistent GetItem of two attributes)."""
        found = self.client.get_item(
            TableName=self.table,
            Key=self._envelope(session_id),
            ConsistentRead=True,
            ProjectionExpression="#gen, #ops",
            ExpressionAttributeNames={"#gen": GEN, "#ops": OPS},
        )
        return Mark.of(found.get("Item"))

    def unmark(self, session_id: str, op_id: str, *, gen: int | None = None) -> bool:
        """Drop turn `op_id` from the mark (one UpdateItem); with `gen`, only while no subscribe
        came after the read that saw generation `gen` (False: one did, the mark stays)."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "Key": self._envelope(session_id),
            "UpdateExpression": "DELETE #ops :op",
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeNames": {"#ops": OPS},
            "ExpressionAttributeValues": {":op": {"SS": [op_id]}},
        }
        if gen is not None:
            request["ConditionExpression"] += " AND #gen = :gen"
            request["ExpressionAttributeNames"]["#gen"] = GEN
            request["ExpressionAttributeValues"][":gen"] = _n(gen)
        try:
            self.client.update_item(**request)
        except Exception as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    @staticmethod
    def _envelope(session_id: str) -> dict[str, dict[str, str]]:
        return {"pk": _s(f"SESSION#{session_id}"), "sk": _s(ENVELOPE_SK)}

    def subscribers(self, session_id: str, op_id: str) -> list[Subscriber]:
        """The connections watching turn `op_id` (one Query of the session's partition)."""
        now = int(time.time())
        found: list[Subscriber] = []
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {
                ":pk": _s(f"SESSION#{session_id}"),
                ":p": _s(f"{LIVE_PREFIX}{op_id}#"),
            },
            "ConsistentRead": True,
        }
        while True:
            page = self.client.query(**request)
            for item in page.get("Items", []):
                if int(item.get("expiresAt", {}).get("N", "0")) < now:
                    continue  # expired, not yet swept by the TTL
                found.append(
                    Subscriber(item["conn"]["S"], item["user"]["S"], int(item["after"]["N"]))
                )
            if "LastEvaluatedKey" not in page:
                return found
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def unsubscribe(self, session_id: str, op_id: str, connection_id: str) -> None:
        """Remove one subscription (its two items)."""
        self._delete(
            [
                (f"SESSION#{session_id}", f"{LIVE_PREFIX}{op_id}#{connection_id}"),
                (f"{CONNECTION_PK_PREFIX}{connection_id}", f"{LIVE_PREFIX}{session_id}#{op_id}"),
            ]
        )

    def disconnect(self, connection_id: str) -> int:
        """Remove every subscription of a closed connection; how many there were."""
        page = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": _s(f"{CONNECTION_PK_PREFIX}{connection_id}")},
            ConsistentRead=True,
        )
        keys: list[tuple[str, str]] = []
        for item in page.get("Items", []):
            session_id, op_id = item["session"]["S"], item["op"]["S"]
            keys.append((f"SESSION#{session_id}", f"{LIVE_PREFIX}{op_id}#{connection_id}"))
            keys.append((item["pk"]["S"], item["sk"]["S"]))
        self._delete(keys)
        return len(keys) // 2

    def _delete(self, keys: list[tuple[str, str]]) -> None:
        if keys:
            batch_write(
                self.client,
                self.table,
                [{"DeleteRequest": {"Key": {"pk": _s(pk), "sk": _s(sk)}}} for pk, sk in keys],
            )
