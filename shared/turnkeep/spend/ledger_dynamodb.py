"""DynamoDB spend ledger in the session table (docs/usage.md, "The ledger").

Items (free text escaped `%` → `%25`, `#` → `%23`):

    pk SPEND#C#{key}      sk CHARGE       the charge's key: it was counted (TTL `expiresAt`)
    pk SPEND#U#{user}     sk D#{day}      the user's day total (`cost`)
    pk SPEND#U#{user}     sk L#{day}#{session}#{model}   the usage line (`ADD` counters)
    pk SPEND#DEPLOYMENT   sk D#{day}      the deployment's day total (`cost`)

A charge is one TransactWriteItems: the key's Put conditioned on `attribute_not_exists(pk)`
and three `ADD` updates, so a redelivered round is never counted twice and concurrent rounds
never lose an increment. Day totals are one BatchGetItem; a user's lines one Query (paginated).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from turnkeep.providers.base import Usage
from turnkeep.spend.ledger import Charge, DayTotals, SpendLedger, UsageLine

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

CHARGE_TTL_S: Final = 3 * 24 * 3600
"""A charge key outlives any redelivery of its round (a turn's steps retry within hours)."""
_COUNTERS: Final = (
    ("rounds", None),
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("cacheReadTokens", "cache_read_tokens"),
    ("cacheWriteTokens", "cache_write_tokens"),
    ("cost", "cost_micros"),
)


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("#", "%23")


def _unescape(text: str) -> str:
    return text.replace("%23", "#").replace("%25", "%")


def _user_pk(user_id: str) -> str:
    return f"SPEND#U#{_escape(user_id)}"


DEPLOYMENT_PK: Final = "SPEND#DEPLOYMENT"


class DynamoLedger(SpendLedger):
    """The ledger's items in `table` (the session table of template.yaml)."""

    def __init__(self, client: DynamoDBClient, table: str, *, now: Any = None) -> None:
        import time

        self._client = client
        self.table = table
        self._now = now or time.time

    def charge(self, charge: Charge) -> bool:
        usage = charge.usage
        line_sk = f"L#{charge.day}#{_escape(charge.session_id)}#{_escape(charge.model)}"
        adds = {":rounds": 1}
        for attribute, field in _COUNTERS[1:]:
            adds[f":{attribute}"] = getattr(usage, field or "")
        line_values: dict[str, Any] = {k: {"N": str(v)} for k, v in adds.items()}
        line_expression = "ADD " + ", ".join(f"{a} :{a}" for a, _ in _COUNTERS)
        if usage.estimated:  # once estimated, the line stays marked
            line_values[":est"] = {"BOOL": True}
            line_expression += " SET est = :est"
        cost: dict[str, Any] = {":cost": {"N": str(usage.cost_micros)}}
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": {
                                "pk": {"S": f"SPEND#C#{_escape(charge.key)}"},
                                "sk": {"S": "CHARGE"},
                                "expiresAt": {"N": str(int(self._now()) + CHARGE_TTL_S)},
                            },
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    self._add(_user_pk(charge.user_id), f"D#{charge.day}", "ADD cost :cost", cost),
                    self._add(_user_pk(charge.user_id), line_sk, line_expression, line_values),
                    self._add(DEPLOYMENT_PK, f"D#{charge.day}", "ADD cost :cost", cost),
                ]
            )
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons") or []
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                return False
            raise
        return True

    def _add(
        self, pk: str, sk: str, expression: str, values: dict[str, Any]
    ) -> TransactWriteItemTypeDef:
        return {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": {"S": pk}, "sk": {"S": sk}},
                "UpdateExpression": expression,
                "ExpressionAttributeValues": values,
            }
        }

    def day_totals(self, user_id: str, day: str) -> DayTotals:
        keys = [
            {"pk": {"S": _user_pk(user_id)}, "sk": {"S": f"D#{day}"}},
            {"pk": {"S": DEPLOYMENT_PK}, "sk": {"S": f"D#{day}"}},
        ]
        found: dict[str, int] = {}
        request: dict[str, Any] = {self.table: {"Keys": keys, "ConsistentRead": True}}
        while request:
            answer = self._client.batch_get_item(RequestItems=request)
            for item in answer.get("Responses", {}).get(self.table, []):
                found[item["pk"]["S"]] = int(item.get("cost", {}).get("N", "0"))
            request = dict(answer.get("UnprocessedKeys") or {})
        return DayTotals(found.get(_user_pk(user_id), 0), found.get(DEPLOYMENT_PK, 0))

    def usage_lines(self, user_id: str, first_day: str, last_day: str) -> list[UsageLine]:
        pages = self._client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": {"S": _user_pk(user_id)},
                ":lo": {"S": f"L#{first_day}#"},
                ":hi": {"S": f"L#{last_day}#\U0010ffff"},
            },
            ConsistentRead=True,
        )
        lines: list[UsageLine] = []
        for page in pages:
            for item in page.get("Items", []):
                _, day, session, model = item["sk"]["S"].split("#", 3)
                counts = {a: int(item.get(a, {}).get("N", "0")) for a, _ in _COUNTERS}
                usage = Usage(
                    counts["inputTokens"],
                    counts["outputTokens"],
                    counts["cacheReadTokens"],
                    counts["cacheWriteTokens"],
                    bool(item.get("est", {}).get("BOOL", False)),
                    counts["cost"],
                )
                lines.append(
                    UsageLine(day, _unescape(session), _unescape(model), counts["rounds"], usage)
                )
        return lines
