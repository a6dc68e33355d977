"""Attribute values, stats and scoped-transaction objects: encoding, decoding and size limits."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Final

from turnkeep.storage.errors import StorageCorruptionError, StorageValidationError
from turnkeep.storage.records import StorageStats
from turnkeep.storage.writes import usd_to_micros

Item = dict[str, Any]
"""A low-level DynamoDB item: attribute name -> attribute value ({"S": ...}, {"N": ...})."""

MAX_PAYLOAD_BYTES: Final = 350_000
"""Largest JSON payload (value, element, entry data) stored inline; DynamoDB items are <= 400 KB.

Larger payloads are rejected, not spilled to S3: see docs/aws-storage.md ("Large payloads")."""
MAX_TRANSACTION_BYTES: Final = 4_000_000
"""DynamoDB TransactWriteItems accepts at most 4 MB of item data."""
MAX_TRANSACTION_ACTIONS: Final = 100
"""DynamoDB TransactWriteItems accepts at most 100 actions (the head update is one of them)."""
OBJECT_FORMAT: Final = 1


def s(text: str) -> dict[str, str]:
    """String attribute."""
    return {"S": text}


def n(number: int) -> dict[str, str]:
    """Number attribute (integers only; floats travel inside JSON strings)."""
    return {"N": str(number)}


def get_s(item: Item, name: str) -> str:
    """String attribute `name` of `item`, or corruption."""
    try:
        text = item[name]["S"]
    except (KeyError, TypeError) as exc:
        raise StorageCorruptionError(f"item {item.get('sk')} lacks string {name!r}") from exc
    if not isinstance(text, str):
        raise StorageCorruptionError(f"item {item.get('sk')}: {name!r} is not a string")
    return text


def get_opt_s(item: Item, name: str) -> str | None:
    """String attribute `name`, or None when absent."""
    return get_s(item, name) if name in item else None


def get_n(item: Item, name: str, default: int | None = None) -> int:
    """Integer attribute `name` of `item` (default when absent and given), or corruption."""
    if name not in item and default is not None:
        return default
    try:
        return int(item[name]["N"])
    except (KeyError, TypeError, ValueError) as exc:
        raise StorageCorruptionError(f"item {item.get('sk')} lacks number {name!r}") from exc


def check_payload(text: str, *, what: str) -> int:
    """UTF-8 size of a JSON payload; raise naming the limit when it cannot be stored inline."""
    size = len(text.encode("utf-8"))
    if size > MAX_PAYLOAD_BYTES:
        raise StorageValidationError(
            f"{what} is {size} bytes of JSON; the aws backend stores at most "
            f"{MAX_PAYLOAD_BYTES} bytes per value, element or entry (DynamoDB items are "
            "limited to 400 KB)"
        )
    return size


def item_size(item: Item) -> int:
    """Approximate DynamoDB size of an item: attribute names plus string/number values."""
    total = 0
    for name, attr in item.items():
        total += len(name.encode("utf-8"))
        for kind, raw in attr.items():
            if kind == "SS":
                total += sum(len(x.encode("utf-8")) for x in raw)
            elif isinstance(raw, str):
                total += len(raw.encode("utf-8"))
            else:
                total += 1
    return total


def stats_to_text(stats: StorageStats) -> str:
    """Stats as compact JSON (every figure an integer; costs in micro-dollars)."""
    return json.dumps(asdict(stats), separators=(",", ":"))


def stats_from_text(text: str | None) -> StorageStats:
    """Inverse of stats_to_text; None is the empty stats."""
    if text is None:
        return StorageStats()
    try:
        data = json.loads(text)
        if "cost_usd" in data:
            # A head written before costs were integer micro-dollars (docs/aws-storage.md).
            data["cost_micros"] = usd_to_micros(data.pop("cost_usd"))
        return StorageStats(**data)
    except (ValueError, TypeError) as exc:
        raise StorageCorruptionError(f"sequence head holds malformed stats: {text[:80]!r}") from exc


def encode_object(session_id: str, scope_id: str, writes: list[dict[str, Any]]) -> bytes:
    """Body of one scoped-transaction object: identity plus the writes with their seqs."""
    body = {"v": OBJECT_FORMAT, "session": session_id, "scope": scope_id, "writes": writes}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode_object(data: bytes, *, key: str, session_id: str, scope_id: str) -> list[dict[str, Any]]:
    """Writes of a scoped-transaction object, validated against the identity it must carry."""
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise StorageCorruptionError(f"scoped object {key!r} is not JSON") from exc
    if (
        not isinstance(body, dict)
        or body.get("v") != OBJECT_FORMAT
        or body.get("session") != session_id
        or body.get("scope") != scope_id
        or not isinstance(body.get("writes"), list)
    ):
        raise StorageCorruptionError(
            f"scoped object {key!r} does not belong to session {session_id!r} "
            f"scope {scope_id!r} (or has an unknown format)"
        )
    writes: list[dict[str, Any]] = body["writes"]
    return writes
