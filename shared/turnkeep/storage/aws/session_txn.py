"""Translate a session transaction into one TransactWriteItems request."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, assert_never

from turnkeep.storage.addresses import Value, ValueList
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
from turnkeep.storage.aws.head import (
    LAST_SEQ,
    PENDING,
    SCOPES,
    SCOPES_SEQ,
    STATS,
    Head,
    pending_marker,
)
from turnkeep.storage.errors import EntryConflictError, StorageValidationError
from turnkeep.storage.records import StorageStats
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
    unwritten: frozenset[str] = frozenset()
    """Retired scopes the head proves had no scoped write to clean up (no marker, no S3 call)."""


def _check_sort_key(sk: str, what: str) -> str:
    size = len(sk.encode("utf-8"))
    if size > keys.MAX_SORT_KEY_BYTES:
        raise StorageValidationError(
            f"{what} makes a DynamoDB sort key of {size} bytes; the limit is "
            f"{keys.MAX_SORT_KEY_BYTES} bytes (shorten the namespace, key or id)"
        )
    return sk


@dataclass
class _Items:
    """The items one session transaction puts (folded per sort key) and the checks it makes."""

    pk: str
    stats: StorageStats
    entry_ids: frozenset[str]
    """Every entry id of the transaction: a parent among them that is not yet inserted comes
    later in the same transaction."""
    puts: dict[str, Item | None] = field(default_factory=dict)
    """sk -> item to put, None = delete."""
    conditions: dict[str, tuple[str, ActionMeta]] = field(default_factory=dict)
    """sk -> (condition, meta)."""
    retired: dict[str, int] = field(default_factory=dict)
    inserted: set[str] = field(default_factory=set)

    def _addressed(self, sk: str, address: Value | ValueList) -> Item:
        """The key and address attributes of a value, list element or tombstone item."""
        return {"pk": s(self.pk), "sk": s(sk), "ns": s(address.namespace), "key": s(address.key)}

    def set_value(self, write: SetValue, seq: int) -> None:
        """Put the value item."""
        addr = write.address
        check_payload(write.value_json, what=f"the value for {addr}")
        sk = _check_sort_key(keys.value_sk(addr.namespace, addr.key), str(addr))
        self.puts[sk] = {**self._addressed(sk, addr), "v": s(write.value_json), "seq": n(seq)}

    def delete_value(self, write: DeleteValue) -> None:
        """Delete the value item."""
        addr = write.address
        self.puts[_check_sort_key(keys.value_sk(addr.namespace, addr.key), str(addr))] = None

    def append_list(self, write: AppendList, seq: int) -> None:
        """Put one list element item."""
        laddr = write.address
        check_payload(write.element_json, what=f"the element for {laddr}")
        sk = _check_sort_key(keys.list_element_sk(laddr.namespace, laddr.key, seq), str(laddr))
        item = {**self._addressed(sk, laddr), "v": s(write.element_json), "seq": n(seq)}
        if write.tag is not None:
            item["tag"] = s(write.tag)
        self.puts[sk] = item

    def delete_list(self, write: DeleteList, seq: int) -> None:
        """Put the list's tombstone, dropping the elements appended earlier in the transaction."""
        laddr = write.address
        prefix = keys.list_prefix(laddr.namespace, laddr.key)
        for earlier in [k for k in self.puts if k.startswith(prefix)]:
            del self.puts[earlier]  # appended and deleted in this transaction: never visible
        sk = _check_sort_key(keys.list_tombstone_sk(laddr.namespace, laddr.key), str(laddr))
        self.puts[sk] = {**self._addressed(sk, laddr), "deleted_through": n(seq)}

    def retire_scope(self, write: RetireScope, seq: int) -> None:
        """Put the scope's retirement boundary."""
        scope_id = write.scope.id
        sk = keys.retirement_sk(scope_id)
        self.puts[sk] = {"pk": s(self.pk), "sk": s(sk), "scope": s(scope_id), "seq": n(seq)}
        self.retired[scope_id] = seq

    def insert_entry(self, write: InsertEntry, seq: int) -> None:
        """Put the entry and its id index item, conditioned on a new id and an existing parent."""
        check_payload(write.data_json, what=f"the data of entry {write.id!r}")
        index_sk = _check_sort_key(keys.entry_index_sk(write.id), f"entry id {write.id!r}")
        if write.parent_id is not None and write.parent_id not in self.inserted:
            if write.parent_id in self.entry_ids:
                raise EntryConflictError(
                    f"entry {write.id!r} names parent {write.parent_id!r}, which does not "
                    "exist (it is inserted later in the same transaction)"
                )
            parent_sk = _check_sort_key(
                keys.entry_index_sk(write.parent_id), f"entry id {write.parent_id!r}"
            )
            self.conditions.setdefault(
                parent_sk,
                ("attribute_exists(sk)", ActionMeta("parent", write.id, write.parent_id)),
            )
        self.inserted.add(write.id)
        entry: Item = {
            "pk": s(self.pk),
            "sk": s(keys.entry_sk(seq)),
            "id": s(write.id),
            "type": s(write.type),
            "data": s(write.data_json),
            "seq": n(seq),
        }
        if write.parent_id is not None:
            entry["parent"] = s(write.parent_id)
        self.puts[keys.entry_sk(seq)] = entry
        self.puts[index_sk] = {
            "pk": s(self.pk),
            "sk": s(index_sk),
            "id": s(write.id),
            "seq": n(seq),
        }
        self.conditions[index_sk] = ("attribute_not_exists(sk)", ActionMeta("duplicate", write.id))
        self.stats = self.stats.with_entry(write.type)

    def insert_usage(self, write: InsertUsage, seq: int) -> None:
        """Put the usage row."""
        sk = keys.usage_sk(seq)
        self.puts[sk] = {"pk": s(self.pk), "sk": s(sk), "row": s(_usage_text(write)), "seq": n(seq)}
        self.stats = self.stats.with_usage(write.row)


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
    items = _folded(txn, seqs, pk, head)
    if txn.guard is not None:
        # On the guard's own item when the transaction writes it (one action per item),
        # else as a ConditionCheck; evaluated against the state before this transaction.
        guard_sk = _check_sort_key(
            keys.value_sk(txn.guard.namespace, txn.guard.key), f"guard {txn.guard}"
        )
        items.conditions[guard_sk] = (_guard_condition(txn.guard_seq), ActionMeta("guard"))
    head_plan = _HeadPlan.of(head, items, seqs, done_markers)
    actions = [head_plan.action(table, pk, session_id, head)]
    metas: list[ActionMeta | None] = [ActionMeta("head")]
    total_bytes = _item_actions(
        items, txn.guard_seq, table=table, pk=pk, actions=actions, metas=metas
    )
    _check_limits(len(actions), total_bytes)
    new_head = Head(
        last_seq=seqs[-1],
        stats=items.stats,
        pending=frozenset(head_plan.pending),
        exists=True,
        scopes=head.scopes - head_plan.cleared,
        scopes_seq=head.scopes_seq + len(seqs),
    )
    return SessionPlan(
        actions,
        metas,
        seqs,
        new_head,
        items.retired,
        head_plan.done_removed,
        head_plan.unwritten,
    )


def _folded(txn: Transaction, seqs: tuple[int, ...], pk: str, head: Head) -> _Items:
    """Every write of `txn` folded onto the items it touches, each with its own sequence."""
    items = _Items(pk, head.stats, frozenset(txn.entry_ids))
    for write, seq in zip(txn.writes, seqs, strict=True):
        match write:
            case SetValue():
                items.set_value(write, seq)
            case DeleteValue():
                items.delete_value(write)
            case AppendList():
                items.append_list(write, seq)
            case DeleteList():
                items.delete_list(write, seq)
            case RetireScope():
                items.retire_scope(write, seq)
            case InsertEntry():
                items.insert_entry(write, seq)
            case InsertUsage():
                items.insert_usage(write, seq)
            case _:
                assert_never(write)
    return items


@dataclass
class _HeadPlan:
    """What the commit does to the sequence head: new pending cleanup markers, the cleaned
    markers it removes, the retired scopes it clears, and those it proves never written."""

    seqs: tuple[int, ...]
    stats: StorageStats
    markers: frozenset[str]
    pending: set[str]
    done_removed: frozenset[str]
    cleared: frozenset[str]
    unwritten: frozenset[str]

    @classmethod
    def of(
        cls, head: Head, items: _Items, seqs: tuple[int, ...], done_markers: frozenset[str]
    ) -> _HeadPlan:
        retired = items.retired
        # A retired scope the head proves unwritten has no object to delete: no marker, no
        # cleanup.
        unwritten = frozenset(sid for sid in retired if head.proves_unwritten(sid))
        markers = frozenset(
            pending_marker(b, sid) for sid, b in retired.items() if sid not in unwritten
        )
        pending = set(head.pending) | markers
        # A path may appear once per update expression, so cleaned markers ride on a
        # transaction that does not add new ones.
        done_removed = done_markers if not markers else frozenset()
        pending -= done_removed
        cleared = frozenset(head.scopes & retired.keys())
        return cls(seqs, items.stats, markers, pending, done_removed, cleared, unwritten)

    def action(self, table: str, pk: str, session_id: str, head: Head) -> dict[str, Any]:
        """The head's conditional update: the new last sequence, stats and scope sets."""
        values: dict[str, Any] = {
            ":last": n(self.seqs[-1]),
            ":stats": s(stats_to_text(self.stats)),
            ":g": s(keys.SESSIONS_GSI_PK),
            ":sid": s(session_id),
            ":count": n(len(self.seqs)),
        }
        expression = f"SET {LAST_SEQ} = :last, {STATS} = :stats, gsi1pk = :g, gsi1sk = :sid"
        adds = [f"{SCOPES_SEQ} :count"]
        deletes: list[str] = []
        if self.markers:
            adds.append(f"{PENDING} :markers")
            values[":markers"] = {"SS": sorted(self.markers)}
        elif self.done_removed:
            deletes.append(f"{PENDING} :done")
            values[":done"] = {"SS": sorted(self.done_removed)}
        if self.cleared:
            deletes.append(f"{SCOPES} :retired")
            values[":retired"] = {"SS": sorted(self.cleared)}
        expression += " ADD " + ", ".join(adds)
        if deletes:
            expression += " DELETE " + ", ".join(deletes)
        if head.exists:
            condition = f"{LAST_SEQ} = :expected"
            values[":expected"] = n(head.last_seq)
        else:
            condition = "attribute_not_exists(sk)"
        return _head_update(table, pk, expression, condition, values)


def _item_actions(
    items: _Items,
    guard_seq: int | None,
    *,
    table: str,
    pk: str,
    actions: list[dict[str, Any]],
    metas: list[ActionMeta | None],
) -> int:
    """Append one Put/Delete per item written and one ConditionCheck per item only checked;
    return the bytes the puts write."""
    conditions = dict(items.conditions)
    total_bytes = 0
    for sk, put in items.puts.items():
        cond = conditions.pop(sk, None)
        if put is None:
            action: dict[str, Any] = {"TableName": table, "Key": {"pk": s(pk), "sk": s(sk)}}
            kind = "Delete"
        else:
            total_bytes += item_size(put)
            action = {"TableName": table, "Item": put}
            kind = "Put"
        if cond is not None:
            action["ConditionExpression"] = cond[0]
            _add_guard_values(action, cond[0], guard_seq)
        actions.append({kind: action})
        metas.append(cond[1] if cond is not None else None)
    for sk, (cond_text, meta) in conditions.items():
        check = _condition_check(table, pk, sk, cond_text)
        _add_guard_values(check["ConditionCheck"], cond_text, guard_seq)
        actions.append(check)
        metas.append(meta)
    return total_bytes


def _check_limits(action_count: int, total_bytes: int) -> None:
    """Refuse a transaction DynamoDB's TransactWriteItems would refuse, before any I/O."""
    if action_count > MAX_TRANSACTION_ACTIONS:
        raise StorageValidationError(
            f"this session transaction needs {action_count} DynamoDB actions (one per item "
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


def plan_allocation(
    count: int,
    *,
    table: str,
    session_id: str,
    scope_id: str,
    head: Head,
    done_markers: frozenset[str],
    guard: Value,
    guard_seq: int | None = None,
) -> SessionPlan:
    """Allocate `count` sequences for a guarded commit to scope `scope_id`: head update (which
    marks the scope written) + guard check."""
    pk = keys.session_pk(session_id)
    last = head.last_seq + count
    values: dict[str, Any] = {
        ":last": n(last),
        ":g": s(keys.SESSIONS_GSI_PK),
        ":sid": s(session_id),
        ":count": n(count),
        ":scope": {"SS": [scope_id]},
    }
    expression = (
        f"SET {LAST_SEQ} = :last, gsi1pk = :g, gsi1sk = :sid "
        f"ADD {SCOPES_SEQ} :count, {SCOPES} :scope"
    )
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
    new_head = Head(
        last,
        head.stats,
        head.pending - done_markers,
        exists=True,
        scopes=head.scopes | {scope_id},
        scopes_seq=head.scopes_seq + count,
    )
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
