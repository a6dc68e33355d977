"""Single-use tickets of the WebSocket API's `$connect` (docs/api.md, "WebSocket API").

A browser cannot set a header on a WebSocket and a JWT must never be in a URL, so the page asks
`POST /live/tickets` (its JWT in the header) for a ticket and connects with `?ticket=`. A ticket
is a random 256-bit value bound to the user who asked, stored as one item of the session table
(`pk=LIVETICKET#<ticket>`, `sk=LIVETICKET`, `user`, `expiresAt` — the table's TTL attribute,
which also bounds its use) and valid `TICKET_TTL_S` seconds. The authorizer redeems it with one
conditional `DeleteItem`: the first connect within its lifetime gets the user, a second (the
item is gone) or a late one (the condition fails) is refused.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

TICKET_TTL_S: Final = 60
"""How long a ticket may be redeemed after it was issued."""
TICKET_PREFIX: Final = "LIVETICKET#"
"""The partition-key prefix of ticket items (the authorizer's IAM policy is scoped to it)."""
_SORT_KEY: Final = "LIVETICKET"
_TICKET_BYTES: Final = 32
_TICKET_SHAPE: Final = re.compile(r"[A-Za-z0-9_-]{43}")
"""`secrets.token_urlsafe(32)`: anything else is refused without a DynamoDB call."""


class TicketRefused(Exception):
    """The ticket is malformed, unknown, already used or expired."""


@dataclass(frozen=True, slots=True)
class Ticket:
    """An issued ticket: its value and the epoch second it expires at."""

    value: str
    expires_at: int


@dataclass(frozen=True)
class TicketStore:
    """Tickets in the DynamoDB table `table` through the low-level `client`."""

    client: Any
    table: str
    clock: Callable[[], float] = time.time

    def issue(self, user_id: str) -> Ticket:
        """A new ticket bound to `user_id`, valid `TICKET_TTL_S` seconds from now."""
        value = secrets.token_urlsafe(_TICKET_BYTES)
        expires_at = int(self.clock()) + TICKET_TTL_S
        self.client.put_item(
            TableName=self.table,
            Item={
                "pk": {"S": TICKET_PREFIX + value},
                "sk": {"S": _SORT_KEY},
                "user": {"S": user_id},
                "expiresAt": {"N": str(expires_at)},
            },
            # A 256-bit random value never repeats; the condition makes sure of it anyway.
            ConditionExpression="attribute_not_exists(pk)",
        )
        return Ticket(value, expires_at)

    def redeem(self, value: str) -> str:
        """The user of ticket `value`, which is used up; `TicketRefused` when it is malformed,
        unknown, already used or expired (TTL deletion lags, so the expiry is checked here)."""
        if not _TICKET_SHAPE.fullmatch(value):
            raise TicketRefused
        try:
            answer = self.client.delete_item(
                TableName=self.table,
                Key={"pk": {"S": TICKET_PREFIX + value}, "sk": {"S": _SORT_KEY}},
                ConditionExpression="attribute_exists(pk) AND expiresAt > :now",
                ExpressionAttributeValues={":now": {"N": str(Decimal(repr(self.clock())))}},
                ReturnValues="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            raise TicketRefused from None
        user = answer.get("Attributes", {}).get("user", {}).get("S")
        if not isinstance(user, str) or not user:
            raise TicketRefused
        return user
