"""Translate a session transaction into one TransactWriteItems request."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from turnkeep.storage.addresses import Value
from turnkeep.storage.aws import keys
from turnkeep.storage.aws.codec import (
    MAX_TRANSACTION_ACTIONS,
    MAX_TRANSACTION_BYTES,
    Item,
    check_payload,
    item_size,
    n,
    s,
    stats_to_text,
)
from turnkeep.storage.aws.head import LAST_SEQ, PENDING, STATS, Head, pending_marker
from turnkeep.storage.errors import EntryConflictError, StorageValidationError
from turnkeep.storage.writes import (
    AppendList,
    DeleteList,
    DeleteValue,
    InsertEntry,
    InsertUsage,
    RetireScope,
    SetValue,
    Transaction,
)


@dataclass(frozen=True, slots=True)
class ActionMeta:
    """Why an action carries a condition, to name the cause when a transaction is cancelled."""

    kind: str
    """"head", "guard" (guard value missing), "duplicate" (entry id exists) or "parent"."""
    entry_id: str = ""
    parent_id: str = ""


@dataclass
class SessionPlan:
    """The request of one attempt and the head it leaves behind when it succeeds."""

    actions: list[dict[str, Any]]
    metas: list[ActionMeta | None]
    seqs: tuple[int, ...]
    new_head: Head
    retired: dict[str, int] = field(default_factory=dict)
    """scope id -> retirement boundary committed by this transaction."""
    done_removed: frozenset[str] = frozenset()


def _check_sort_key(sk: str, what: str) -> str:
    size = len(sk.encode("utf-8"))
    if size > keys.MAX_SORT_KEY_BYTES:
        raise StorageValidationError(
            f"{what} makes a DynamoDB sort key of {size} bytes; the limit is "
            f"{keys.MAX_SORT_KEY_BYTES} bytes (shorten the namespace, key or id)"
        )
    return sk


def plan_session_commit(
    txn: Transaction,
    *,
    table: str,
    session_id: str,
    head: Head,
    done_markers: frozenset[str],
) -> SessionPlan:
    """Build the actions of `txn` assuming `head` is current; raise on limits before any I/O.

    Writes to one item fold to their last effect (one action per item), but every write still
    consumes its own sequence.
    """
    pk = keys.session_pk(session_id)
    first = head.last_seq + 1
    seqs = tuple(range(first, first + len(txn.writes)))
    puts: dict[str, Item | None] = {}  # sk -> item to put, None = delete
    conditions: dict[str, tuple[str, ActionMeta]] = {}  # sk -> (condition, meta)
    retired: dict[str, int] = {}
    stats = head.stats
    inserted: set[str] = set()
    later_ids = set(txn.entry_ids)

    for write, seq in zip(txn.writes, seqs, strict=True):
        if isinstance(write, SetValue):
            addr = write.address
            check_payload(write.value_json, what=f"the value for {addr}")
            sk = _check_sort_key(keys.value_sk(addr.namespace, addr.key), str(addr))
            puts[sk] = {
                "pk": s(pk),
                "sk": s(sk),
                "ns": s(addr.namespace),
                "key": s(addr.key),
                "v": s(write.value_json),
                "seq": n(seq),
            }
        elif isinstance(write, DeleteValue):
            addr = write.address
            puts[_check_sort_key(keys.value_sk(addr.namespace, addr.key), str(addr))] = None
        elif isinstance(write, AppendList):
            laddr = write.address
            check_payload(write.element_json, what=f"the element for {laddr}")
            sk = _check_sort_key(keys.list_element_sk(laddr.namespace, laddr.key, seq), str(laddr))
            item: Item = {
                "pk": s(pk),
                "sk": s(sk),
                "ns": s(laddr.namespace),
                "key": s(laddr.key),
                "v": s(write.element_json),
                "seq": n(seq),
            }
            if write.tag is not None:
                item["tag"] = s(write.tag)
            puts[sk] = item
        elif isinstance(write, DeleteList):
            laddr = write.address
            prefix = keys.list_prefix(laddr.namespace, laddr.key)
            for earlier in [k for k in puts if k.startswith(prefix)]:
                del puts[earlier]  # appended and deleted in this transaction: never visible
            sk = _check_sort_key(keys.list_tombstone_sk(laddr.namespace, laddr.key), str(laddr))
            puts[sk] = {
                "pk": s(pk),
                "sk": s(sk),
                "ns": s(laddr.namespace),
                "key": s(laddr.key),
                "deleted_through": n(seq),
            }
        elif isinstance(write, RetireScope):
            scope_id = write.scope.id
            sk = keys.retirement_sk(scope_id)
            puts[sk] = {"pk": s(pk), "sk": s(sk), "scope": s(scope_id), "seq": n(seq)}
            retired[scope_id] = seq
        elif isinstance(write, InsertEntry):
            check_payload(write.data_json, what=f"the data of entry {write.id!r}")
            index_sk = _check_sort_key(keys.entry_index_sk(write.id), f"entry id {write.id!r}")
            if write.parent_id is not None and write.parent_id not in inserted:
                if write.parent_id in later_ids:
                    raise EntryConflictError(
                        f"entry {write.id!r} names parent {write.parent_id!r}, which does not "
                        "exist (it is inserted later in the same transaction)"
                    )
                parent_sk = _check_sort_key(
                    keys.entry_index_sk(write.parent_id), f"entry id {write.parent_id!r}"
                )
                conditions.setdefault(
                    parent_sk,
                    ("attribute_exists(sk)", ActionMeta("parent", write.id, write.parent_id)),
                )
            inserted.add(write.id)
            entry: Item = {
                "pk": s(pk),
                "sk": s(keys.entry_sk(seq)),
                "id": s(write.id),
                "type": s(write.type),
                "data": s(write.data_json),
                "seq": n(seq),
            }
            if write.parent_id is not None:
                entry["parent"] = s(write.parent_id)
            puts[keys.entry_sk(seq)] = entry
            puts[index_sk] = {"pk": s(pk), "sk": s(index_sk), "id": s(write.id), "seq": n(seq)}
            conditions[index_sk] = (
                "attribute_not_exists(sk)",
                ActionMeta("duplicate", write.id),
            )
            stats = stats.with_entry(write.type)
        elif isinstance(write, InsertUsage):
            sk = keys.usage_sk(seq)
            puts[sk] = {
                "pk": s(pk),
                "sk": s(sk),
                "row": s(_usage_text(write)),
                "seq": n(seq),
            }
            stats = stats.with_usage(write.row)
        else:  # pragma: no cover - build_transaction admits only the types above
            raise TypeError(f"unknown write {write!r}")

    if txn.guard is not None:
        # On the guard's own item when the transaction writes it (one action per item),
        # else as a ConditionCheck; evaluated against the state before this transaction.
        guard_sk = _check_sort_key(
            keys.value_sk(txn.guard.namespace, txn.guard.key), f"guard {txn.guard}"
        )
        conditions[guard_sk] = (_guard_condition(txn.guard_seq), ActionMeta("guard"))

    actions: list[dict[str, Any]] = []
    metas: list[ActionMeta | None] = []
    last = seqs[-1]
    head_values: dict[str, Any] = {
        ":last": n(last),
        ":stats": s(stats_to_text(stats)),
        ":g": s(keys.SESSIONS_GSI_PK),
        ":sid": s(session_id),
    }
    expression = f"SET {LAST_SEQ} = :last, {STATS} = :stats, gsi1pk = :g, gsi1sk = :sid"
    markers = frozenset(pending_marker(b, sid) for sid, b in retired.items())
    pending = set(head.pending)
    done_removed: frozenset[str] = frozenset()
    if markers:
        expression += f" ADD {PENDING} :markers"
        head_values[":markers"] = {"SS": sorted(markers)}
        pending |= markers
    elif done_markers:
        # A path may appear once per update expression, so cleaned markers ride on a
        # transaction that does not add new ones.
        expression += f" DELETE {PENDING} :done"
        head_values[":done"] = {"SS": sorted(done_markers)}
        pending -= done_markers
        done_removed = done_markers
    if head.exists:
        condition = f"{LAST_SEQ} = :expected"
        head_values[":expected"] = n(head.last_seq)
    else:
        condition = "attribute_not_exists(sk)"
    actions.append(_head_update(table, pk, expression, condition, head_values))
    metas.append(ActionMeta("head"))

    total_bytes = 0
    for sk, put in puts.items():
        cond = conditions.pop(sk, None)
        if put is None:
            delete: dict[str, Any] = {"TableName": table, "Key": {"pk": s(pk), "sk": s(sk)}}
            if cond is not None:
                delete["ConditionExpression"] = cond[0]
                _add_guard_values(delete, cond[0], txn.guard_seq)
            actions.append({"Delete": delete})
            metas.append(cond[1] if cond is not None else None)
            continue
        total_bytes += item_size(put)
        action: dict[str, Any] = {"TableName": table, "Item": put}
        if cond is not None:
            action["ConditionExpression"] = cond[0]
            _add_guard_values(action, cond[0], txn.guard_seq)
        actions.append({"Put": action})
        metas.append(cond[1] if cond is not None else None)
    for sk, (cond_text, meta) in conditions.items():
        check = _condition_check(table, pk, sk, cond_text)
        _add_guard_values(check["ConditionCheck"], cond_text, txn.guard_seq)
        actions.append(check)
        metas.append(meta)

    if len(actions) > MAX_TRANSACTION_ACTIONS:
        raise StorageValidationError(
            f"this session transaction needs {len(actions)} DynamoDB actions (one per item "
            "written, two per entry, one per existing parent or guard checked, plus the sequence "
            "head); "
            f"the aws backend commits at most {MAX_TRANSACTION_ACTIONS} actions at once "
            "(DynamoDB TransactWriteItems limit): split it into smaller transactions"
        )
    if total_bytes > MAX_TRANSACTION_BYTES:
        raise StorageValidationError(
            f"this session transaction writes about {total_bytes} bytes; DynamoDB "
            f"TransactWriteItems accepts at most {MAX_TRANSACTION_BYTES} bytes (4 MB)"
        )
    new_head = Head(last_seq=last, stats=stats, pending=frozenset(pending), exists=True)
    return SessionPlan(actions, metas, seqs, new_head, retired, done_removed)


def plan_allocation(
    count: int,
    *,
    table: str,
    session_id: str,
    head: Head,
    done_markers: frozenset[str],
    guard: Value,
    guard_seq: int | None = None,
) -> SessionPlan:
    """Allocate `count` sequences for a guarded scoped commit: head update + guard check."""
    pk = keys.session_pk(session_id)
    last = head.last_seq + count
    values: dict[str, Any] = {
        ":last": n(last),
        ":g": s(keys.SESSIONS_GSI_PK),
        ":sid": s(session_id),
    }
    expression = f"SET {LAST_SEQ} = :last, gsi1pk = :g, gsi1sk = :sid"
    if done_markers:
        expression += f" DELETE {PENDING} :done"
        values[":done"] = {"SS": sorted(done_markers)}
    if head.exists:
        condition = f"{LAST_SEQ} = :expected"
        values[":expected"] = n(head.last_seq)
    else:
        condition = "attribute_not_exists(sk)"
    guard_sk = _check_sort_key(keys.value_sk(guard.namespace, guard.key), f"guard {guard}")
    check = _condition_check(table, pk, guard_sk, _guard_condition(guard_seq))
    _add_guard_values(check["ConditionCheck"], _guard_condition(guard_seq), guard_seq)
    actions = [_head_update(table, pk, expression, condition, values), check]
    new_head = Head(last, head.stats, head.pending - done_markers, exists=True)
    seqs = tuple(range(head.last_seq + 1, last + 1))
    return SessionPlan(actions, [ActionMeta("head"), ActionMeta("guard")], seqs, new_head)


def _head_update(
    table: str, pk: str, expression: str, condition: str, values: dict[str, Any]
) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": {"pk": s(pk), "sk": s(keys.HEAD_SK)},
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
            # A lost race returns the head as it is: the retry needs no read of its own.
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def _guard_condition(guard_seq: int | None) -> str:
    """The guard's condition: it exists (and, with `guard_seq`, is still that version)."""
    if guard_seq is None:
        return "attribute_exists(sk)"
    return "attribute_exists(sk) AND seq = :guard_seq"


def _add_guard_values(action: dict[str, Any], condition: str, guard_seq: int | None) -> None:
    if ":guard_seq" in condition and guard_seq is not None:
        action["ExpressionAttributeValues"] = {":guard_seq": n(guard_seq)}


def _condition_check(table: str, pk: str, sk: str, condition: str) -> dict[str, Any]:
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": {"pk": s(pk), "sk": s(sk)},
            "ConditionExpression": condition,
        }
    }


def _usage_text(write: InsertUsage) -> str:
    return json.dumps(write.row.to_json(), separators=(",", ":"))
