"""DynamoDB envelope store (`aws://?table=T`): one item per session, meta keys as attributes.

Item: `pk = "SESSION#{session id}"`, `sk = "ENVELOPE"`, `gsi1pk = "OWNER#{owner id}"`,
`gsi1sk = "SESSION#{session id}"`, `ownerId`, `sessionId`, `createdAt`, `updatedAt` (epoch ms)
and one attribute `m_{key}` per meta key, so every write is a field-level `UpdateItem`:

- a worker write SETs/REMOVEs only the attributes it names, plus `updatedAt`;
- a host PUT SETs the given host attributes and REMOVEs the other host attributes;
- both are conditional on `attribute_exists(pk) AND updatedAt < :new` (strictly newer; a
  missing or non-number `updatedAt` counts as 0), plus the owner and any `expect`
  conditions. The first attempt uses the wall clock; when a stored `updatedAt` is not older
  (a racing write in the same millisecond, or clock skew) the failed condition returns the
  old item (`ReturnValuesOnConditionCheckFailure=ALL_OLD`) and the write is retried once with
  `stored + 1`; a second loss is `EnvelopeConflictError`.

Items of the same partition with `sk` starting `S#` belong to session storage; this module
reads and writes only `sk = "ENVELOPE"`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from turnkeep.envelope import keys
from turnkeep.envelope.base import (
    Clock,
    EnvelopeStore,
    RawEnvelope,
    cleared_host_keys,
    decode,
    next_updated_at,
    split_patch,
)
from turnkeep.envelope.errors import (
    EnvelopeConflictError,
    EnvelopeError,
    EnvelopeExistsError,
    EnvelopeNotFoundError,
    EnvelopeUnavailableError,
)
from turnkeep.envelope.model import Envelope, MetaScalar
from turnkeep.plumbing.dynamodb_batches import UnprocessedError, batch_get
from turnkeep.storage.attached import AttachedKey, AttachedUpdate

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ENVELOPE_SK = "ENVELOPE"
META_PREFIX = "m_"
OWNER_INDEX = "gsi1"
_CONDITION_FAILED = "ConditionalCheckFailedException"


def session_pk(session_id: str) -> str:
    """Partition key of every item of a session."""
    return f"SESSION#{session_id}"


def owner_gsi1pk(owner_id: str) -> str:
    """Owner index partition key of an envelope."""
    return f"OWNER#{owner_id}"


def _key(session_id: str) -> dict[str, Any]:
    return {"pk": {"S": session_pk(session_id)}, "sk": {"S": ENVELOPE_SK}}


def to_attr(value: MetaScalar) -> dict[str, Any]:
    """The DynamoDB attribute value of a meta scalar (bool before int: bool is an int)."""
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        return {"N": repr(value)}
    return {"S": value}


def from_attr(attr: Mapping[str, Any]) -> object:
    """A stored attribute as Python; non-scalar types come back as-is (poison, dropped later)."""
    if "S" in attr:
        return attr["S"]
    if "BOOL" in attr:
        return bool(attr["BOOL"])
    if "N" in attr:
        text = str(attr["N"])
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return attr
    return dict(attr)


def _raw(item: Mapping[str, Any]) -> RawEnvelope:
    pk = item.get("pk", {}).get("S", "")
    session_id = pk.removeprefix("SESSION#")
    meta = {
        name[len(META_PREFIX) :]: from_attr(attr)
        for name, attr in item.items()
        if name.startswith(META_PREFIX)
    }
    return RawEnvelope(
        session_id=session_id,
        owner_id=from_attr(item["ownerId"]) if "ownerId" in item else None,
        created_at=from_attr(item["createdAt"]) if "createdAt" in item else 0,
        updated_at=from_attr(item["updatedAt"]) if "updatedAt" in item else 0,
        meta=meta,
    )


def _poison_pins(
    item: Mapping[str, Any], expect: Mapping[str, tuple[MetaScalar | None, ...]]
) -> dict[str, Mapping[str, Any]]:
    """The stored attributes of `expect` keys that read back as something else (poison).

    A condition can only test raw values, so a retry pins such a key to the exact attribute
    seen: still a compare-and-set, on the value whose read-back satisfied `expect`.
    """
    pins: dict[str, Mapping[str, Any]] = {}
    for key in expect:
        attr = item.get(META_PREFIX + key)
        if attr is None:
            continue
        value = from_attr(attr)
        if not keys.same_scalar(keys.read_back(key, value), value):
            pins[key] = attr
    return pins


class _Expression:
    """Builds expression attribute names/values with collision-free placeholders."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, attribute: str) -> str:
        for placeholder, known in self.names.items():
            if known == attribute:
                return placeholder
        placeholder = f"#n{len(self.names)}"
        self.names[placeholder] = attribute
        return placeholder

    def value(self, attr: dict[str, Any]) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = attr
        return placeholder


def _unavailable(operation: str, exc: Exception) -> EnvelopeUnavailableError:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        detail = f"{error.get('Code', '?')}: {error.get('Message', '')}"
    else:
        detail = f"{type(exc).__name__}: {exc}"
    return EnvelopeUnavailableError(f"DynamoDB {operation} failed ({detail})")


def _is_condition_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == _CONDITION_FAILED


class DynamoEnvelopeStore(EnvelopeStore):
    """Envelopes as items of the session table; the boto3 client is injected."""

    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        *,
        clock: Clock | None = None,
        owns_client: bool = False,
    ) -> None:
        super().__init__(clock=clock)
        if not table:
            raise EnvelopeError("DynamoDB envelope store needs a table name")
        self.client = client
        self.table = table
        self._owns_client = owns_client

    # -- reads -----------------------------------------------------------------------------------

    def _load(self, session_id: str) -> RawEnvelope | None:
        item = self._get_item(session_id)
        return None if item is None else _raw(item)

    def _get_item(self, session_id: str) -> Mapping[str, Any] | None:
        try:
            resp = self.client.get_item(
                TableName=self.table, Key=_key(session_id), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise _unavailable("GetItem", exc) from exc
        return resp.get("Item")

    def _owner_session_keys(self, owner_id: str) -> Iterator[dict[str, Any]]:
        paginator = self.client.get_paginator("query")
        pages = paginator.paginate(
            TableName=self.table,
            IndexName=OWNER_INDEX,
            KeyConditionExpression="gsi1pk = :o",
            ExpressionAttributeValues={":o": {"S": owner_gsi1pk(owner_id)}},
        )
        for page in pages:
            for item in page.get("Items", []):
                if item.get("sk", {}).get("S") == ENVELOPE_SK:
                    yield {"pk": item["pk"], "sk": item["sk"]}

    def _list_owner(self, owner_id: str) -> list[RawEnvelope]:
        try:
            wanted = list(self._owner_session_keys(owner_id))
            return [_raw(item) for item in batch_get(self.client, self.table, wanted)]
        except (ClientError, BotoCoreError, UnprocessedError) as exc:
            raise _unavailable("Query/BatchGetItem", exc) from exc

    # -- writes ----------------------------------------------------------------------------------

    def _create(
        self, session_id: str, owner_id: str, meta: dict[str, MetaScalar], now: int
    ) -> RawEnvelope:
        item: dict[str, Any] = {
            **_key(session_id),
            "gsi1pk": {"S": owner_gsi1pk(owner_id)},
            "gsi1sk": {"S": session_pk(session_id)},
            "ownerId": {"S": owner_id},
            "sessionId": {"S": session_id},
            "createdAt": {"N": str(now)},
            "updatedAt": {"N": str(now)},
            **{META_PREFIX + k: to_attr(v) for k, v in meta.items()},
        }
        try:
            self.client.put_item(
                TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)"
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise EnvelopeExistsError(
                    f"session {session_id!r} already has an envelope"
                ) from exc
            raise _unavailable("PutItem", exc) from exc
        except BotoCoreError as exc:
            raise _unavailable("PutItem", exc) from exc
        return _raw(item)

    def _put_host(self, session_id: str, owner_id: str, meta: dict[str, MetaScalar]) -> RawEnvelope:
        return self._conditional_update(session_id, owner_id, meta, cleared_host_keys(meta), {})

    def _update_worker(
        self,
        session_id: str,
        patch: dict[str, MetaScalar | None],
        expect: dict[str, tuple[MetaScalar | None, ...]],
        owner_id: str | None,
    ) -> RawEnvelope:
        sets, removes = split_patch(patch)
        return self._conditional_update(session_id, owner_id, sets, removes, expect)

    def _conditional_update(
        self,
        session_id: str,
        owner_id: str | None,
        sets: Mapping[str, MetaScalar],
        removes: Sequence[str],
        expect: dict[str, tuple[MetaScalar | None, ...]],
    ) -> RawEnvelope:
        new_updated = self._now()
        pins: dict[str, Mapping[str, Any]] = {}
        for attempt in range(2):
            request = self._update_request(
                session_id,
                owner_id=owner_id,
                sets=sets,
                removes=removes,
                expect=expect,
                pins=pins,
                new_updated=new_updated,
            )
            try:
                resp = self.client.update_item(**request)
                return _raw(resp["Attributes"])
            except ClientError as exc:
                if not _is_condition_failure(exc):
                    raise _unavailable("UpdateItem", exc) from exc
                item = self._old_item(session_id, exc)
            except BotoCoreError as exc:
                raise _unavailable("UpdateItem", exc) from exc
            # Which condition failed decides the outcome; only a lost updatedAt race (or a
            # poison value the condition could not see as unset) retries.
            old = None if item is None else _raw(item)
            if old is None or (owner_id is not None and old.owner_id != owner_id):
                raise EnvelopeNotFoundError(f"no envelope for session {session_id!r}")
            if not keys.expect_holds(old.meta, expect):
                raise EnvelopeConflictError(keys.describe_conflict(session_id, old.meta, expect))
            if attempt == 0:
                new_updated = next_updated_at(old.updated_at, self._now())
                pins = _poison_pins(item or {}, expect)
        raise EnvelopeConflictError(
            f"session {session_id!r}: a concurrent envelope write won twice; not applied"
        )

    def _old_item(self, session_id: str, exc: ClientError) -> Mapping[str, Any] | None:
        """The item that failed the condition (returned with the error, else read again)."""
        item = cast("Mapping[str, Any] | None", dict(exc.response).get("Item"))
        if item is not None:
            return item
        # Absent item (nothing to return) or an SDK that drops it: a consistent read decides.
        return self._get_item(session_id)

    def _update_request(
        self,
        session_id: str,
        *,
        owner_id: str | None,
        sets: Mapping[str, MetaScalar],
        removes: Sequence[str],
        expect: dict[str, tuple[MetaScalar | None, ...]],
        pins: Mapping[str, Mapping[str, Any]],
        new_updated: int,
    ) -> dict[str, Any]:
        ex = _Expression()
        updated = ex.name("updatedAt")
        new_value = ex.value({"N": str(new_updated)})
        set_parts = [f"{updated} = {new_value}"]
        set_parts += [
            f"{ex.name(META_PREFIX + k)} = {ex.value(to_attr(v))}" for k, v in sets.items()
        ]
        update = "SET " + ", ".join(set_parts)
        if removes:
            update += " REMOVE " + ", ".join(ex.name(META_PREFIX + k) for k in removes)
        # A missing or non-number (poison) updatedAt reads as 0, so it must not block writes.
        number = ex.value({"S": "N"})
        conditions = [
            f"attribute_exists({ex.name('pk')})",
            f"(NOT attribute_type({updated}, {number}) OR {updated} < {new_value})",
        ]
        if owner_id is not None:
            conditions.append(f"{ex.name('ownerId')} = {ex.value({'S': owner_id})}")
        for key, allowed in expect.items():
            attribute = ex.name(META_PREFIX + key)
            if key in pins:  # exactly the poison value seen, which reads as an allowed one
                conditions.append(f"{attribute} = {ex.value(dict(pins[key]))}")
                continue
            options = [f"{attribute} = {ex.value(to_attr(v))}" for v in allowed if v is not None]
            if any(v is None for v in allowed):
                options.append(f"attribute_not_exists({attribute})")
            conditions.append("(" + " OR ".join(options) + ")")
        return {
            "TableName": self.table,
            "Key": _key(session_id),
            "UpdateExpression": update,
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": ex.names,
            "ExpressionAttributeValues": ex.values,
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    # -- riding on session storage's requests ---------------------------------------------------

    def attached_key(self, session_id: str) -> AttachedKey | None:
        return AttachedKey(
            self.table, session_pk(keys.validate_session_id(session_id)), ENVELOPE_SK
        )

    def decode_attached(self, item: Mapping[str, Any] | None) -> Envelope | None:
        return None if item is None else decode(_raw(item))

    def attached_update(
        self,
        session_id: str,
        patch_for: Callable[[tuple[int, ...]], Mapping[str, MetaScalar | None]],
        *,
        expect: Mapping[str, Collection[MetaScalar | None]] | None = None,
        owner_id: str | None = None,
        stamp: int | None = None,
    ) -> AttachedUpdate | None:
        sid = keys.validate_session_id(session_id)
        oid = None if owner_id is None else keys.validate_owner_id(owner_id)
        conditions = keys.validate_expect(expect)
        self._check_open()
        new_updated = stamp if stamp is not None else self._now()

        def action(seqs: tuple[int, ...]) -> dict[str, Any]:
            sets, removes = split_patch(keys.validate_worker_patch(patch_for(seqs)))
            request = self._update_request(
                sid,
                owner_id=oid,
                sets=sets,
                removes=removes,
                expect=conditions,
                pins={},
                new_updated=new_updated,
            )
            del request["ReturnValues"]  # not part of a transaction's Update
            return {"Update": request}

        return AttachedUpdate(self.table, action)

    def attached_failure(
        self,
        session_id: str,
        item: Mapping[str, Any] | None,
        *,
        expect: Mapping[str, Collection[MetaScalar | None]] | None = None,
        owner_id: str | None = None,
    ) -> int:
        sid = keys.validate_session_id(session_id)
        if item is None:  # absent (nothing to return) or dropped: a consistent read decides
            item = self._get_item(sid)
        old = None if item is None else _raw(item)
        if old is None or (owner_id is not None and old.owner_id != owner_id):
            raise EnvelopeNotFoundError(f"no envelope for session {sid!r}")
        conditions = keys.validate_expect(expect)
        if not keys.expect_holds(old.meta, conditions):
            raise EnvelopeConflictError(keys.describe_conflict(sid, old.meta, conditions))
        return next_updated_at(old.updated_at, self._now())

    def _delete(self, session_id: str) -> None:
        try:
            self.client.delete_item(TableName=self.table, Key=_key(session_id))
        except (ClientError, BotoCoreError) as exc:
            raise _unavailable("DeleteItem", exc) from exc

    def _close(self) -> None:
        if self._owns_client:
            self.client.close()

    # -- test hook ------------------------------------------------------------------------------

    def poke_raw(self, session_id: str, key: str, value: object) -> None:
        """Store `value` under `key` bypassing validation (tests plant poison with it)."""
        from boto3.dynamodb.types import TypeSerializer

        self.client.update_item(
            TableName=self.table,
            Key=_key(session_id),
            UpdateExpression="SET #a = :v",
            ExpressionAttributeNames={"#a": META_PREFIX + key},
            ExpressionAttributeValues={":v": TypeSerializer().serialize(value)},
        )
