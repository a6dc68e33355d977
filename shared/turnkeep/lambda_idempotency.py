"""Powertools idempotency records keyed per session: partition `IDEMPOTENCY#<step>#<session>`.

A static partition per step (`IDEMPOTENCY#<step>`) would put every session's put+update pairs
on one DynamoDB partition (1,000 write units/s): a deployment-wide ceiling (docs/aws-storage.md).
Keyed per session, a partition sees only that session's turns, which run one at a time.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

NO_SESSION = "-"
"""Partition suffix of an event without a usable `session_id` (the step rejects it anyway)."""


def record_partition(step: str, session_id: object) -> str:
    """The partition key of `step`'s records for `session_id` (quoted: no `#` or `|` inside)."""
    session = (
        quote(session_id, safe="") if isinstance(session_id, str) and session_id else NO_SESSION
    )
    return f"IDEMPOTENCY#{step}#{session}"


class SessionKeyedPersistenceLayer(DynamoDBPersistenceLayer):
    """DynamoDB idempotency records whose partition key names the event's session.

    Powertools builds a record's key from the hashed idempotency key alone (`_get_key`), so the
    partition travels inside that key: `<partition>|<hashed key>`, split again in `_get_key`.
    """

    def __init__(self, step: str, **options: Any) -> None:
        super().__init__(key_attr="pk", sort_key_attr="sk", **options)
        self.step = step

    def _get_hashed_idempotency_key(self, data: dict[str, Any]) -> str | None:
        hashed = super()._get_hashed_idempotency_key(data)
        if hashed is None:
            return None
        session = data.get("session_id") if isinstance(data, dict) else None
        return f"{record_partition(self.step, session)}|{hashed}"

    def _get_key(self, idempotency_key: str) -> dict[str, Any]:
        partition, _, hashed = idempotency_key.partition("|")
        return {self.key_attr: {"S": partition}, "sk": {"S": hashed}}  # sort_key_attr is "sk"
