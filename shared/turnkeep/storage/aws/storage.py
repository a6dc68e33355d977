"""AwsStorage: one session's storage on DynamoDB (main log) and S3 (scoped progress)."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from turnkeep.plumbing.dynamodb_batches import batch_get
from turnkeep.storage.addresses import Value, ValueList
from turnkeep.storage.attached import AttachedKey, AttachedUpdate
from turnkeep.storage.aws import keys
from turnkeep.storage.aws.cancellation import cancel_reasons, raise_cancel_cause
from turnkeep.storage.aws.cleanup import delete_through
from turnkeep.storage.aws.codec import (
    Item,
    decode_object,
    encode_object,
    get_n,
    get_opt_s,
    get_s,
    n,
    s,
)
from turnkeep.storage.aws.head import (
    LAST_SEQ,
    PENDING,
    SCOPES,
    SCOPES_SEQ,
    Head,
    head_from_item,
    parse_marker,
    pending_marker,
)
from turnkeep.storage.aws.scoped import ObjectWrites, ScopeView, object_writes
from turnkeep.storage.aws.session_state import SessionState, aws_call
from turnkeep.storage.aws.session_txn import ActionMeta, plan_allocation, plan_session_commit
from turnkeep.storage.base import ListOrder, Storage, now_ms
from turnkeep.storage.errors import (
    StorageConflictError,
    StorageUnavailableError,
    StorageValidationError,
)
from turnkeep.storage.jsonvalue import load_json
from turnkeep.storage.records import (
    CommitResult,
    Entry,
    ListElement,
    Snapshot,
    StorageStats,
    StoredValue,
)
from turnkeep.storage.scopes import EphemeralScope, Scope, SessionScope
from turnkeep.storage.writes import InsertEntry, Transaction, UsageRow

if TYPE_CHECKING:
    from turnkeep.storage.aws.repository import AwsRepository

LOG = logging.getLogger(__name__)
MAX_COMMIT_ATTEMPTS: Final = 10
"""Session commits re-read the head and retry this often before StorageConflictError."""
GET_WORKERS: Final = 16
MAX_SEQ: Final = 10**keys.SEQ_DIGITS - 1


class AwsStorage(Storage):
    """A handle on one session; handles of one session in one repository share caches and lock."""

    def __init__(self, repo: AwsRepository, session_id: str, state: SessionState) -> None:
        super().__init__(session_id, lock=state.lock)
        self._repo = repo
        self._state = state
        self._ddb = repo.dynamodb
        self._table = repo.table
        self._bucket = repo.bucket
        self._pk = keys.session_pk(session_id)
        # Read ahead by `prefetch`, each answered once (a later read goes to the table).
        self._ahead: dict[str, Item | None] = {}
        self._ahead_boundaries: dict[str, int] = {}
        # Scopes whose boundary was read ahead together with a head proving them unwritten.
        self._ahead_unwritten: set[str] = set()

    # -- the head: read on first need, then retry unfinished cleanups -------------------------

    def recover(self) -> None:
        """Read the head and finish every retirement cleanup a crash or failure left pending."""
        self._state.recovered = False
        self._read_head()

    def _recover(self, head: Head) -> None:
        state = self._state
        if state.recovered:
            return
        state.recovered = True
        for marker in sorted(head.pending - state.done):
            boundary, scope_id = parse_marker(marker)
            self._cleanup(scope_id, boundary)

    def _cleanup(self, scope_id: str, boundary: int) -> None:
        prefix = self._repo.objects.scope_prefix(self.session_id, scope_id)
        marker = pending_marker(boundary, scope_id)
        try:
            delete_through(self._repo.s3, self._bucket, prefix, boundary)
        except StorageUnavailableError as exc:
            # The boundary already hides these objects; the head keeps the marker, so the
            # next handle that reads the head retries the deletion.
            LOG.warning("retirement cleanup of %r deferred: %s", scope_id, exc)
            return
        # Recorded in the head at once, so no later handle lists the cleaned prefix again; the
        # DELETE touches no sequence, so it races no head-conditioned commit.
        try:
            with aws_call("recording a finished cleanup"):
                self._ddb.update_item(
                    TableName=self._table,
                    Key=self._key(keys.HEAD_SK),
                    UpdateExpression=f"DELETE {PENDING} :m",
                    ExpressionAttributeValues={":m": {"SS": [marker]}},
                )
        except StorageUnavailableError as exc:
            LOG.warning("finished cleanup of %r recorded by the next commit: %s", scope_id, exc)
            self._state.done.add(marker)

    def _read_head(self) -> Head:
        with aws_call("reading the sequence head"):
            found = self._ddb.get_item(
                TableName=self._table, Key=self._key(keys.HEAD_SK), ConsistentRead=True
            )
        return self._adopt_head(found.get("Item"))

    def _adopt_head(self, item: Item | None) -> Head:
        head = head_from_item(item)
        previous = self._state.head
        self._state.observe(head, expected=None if previous is None else previous.last_seq)
        self._recover(head)
        return head

    # -- reading ahead ------------------------------------------------------------------------

    def attached_table(self) -> str | None:
        return self._table

    def prefetch(
        self,
        values: Sequence[Value] = (),
        *,
        scopes: Sequence[EphemeralScope] = (),
        attached: Sequence[AttachedKey] = (),
        head: bool = False,
        entries: Sequence[str] = (),
    ) -> dict[AttachedKey, Mapping[str, Any] | None] | None:
        """One BatchGetItem for the head, session values, scope boundaries, entry index items
        and `attached` items of this table (docs/aws-storage.md, "Reads and caching")."""
        with self._lock:
            self._ensure_open()
            return self._prefetch(values, scopes, attached, head, entries)

    def entry_seqs(self, ids: Sequence[str]) -> dict[str, int]:
        with self._lock:
            self._ensure_open()
            found: dict[str, int] = {}
            missing = []
            for entry_id in dict.fromkeys(ids):
                sk = keys.entry_index_sk(entry_id)
                if sk in self._ahead:
                    item = self._ahead[sk]
                    if item is not None:
                        found[entry_id] = get_n(item, "seq")
                else:
                    missing.append(sk)
            for item in self._batch_get(missing).values() if missing else ():
                found[get_s(item, "id")] = get_n(item, "seq")
            return found

    def _prefetch(
        self,
        values: Sequence[Value],
        scopes: Sequence[EphemeralScope],
        attached: Sequence[AttachedKey],
        head: bool,
        entries: Sequence[str],
    ) -> dict[AttachedKey, Mapping[str, Any] | None]:
        state = self._state
        wanted: dict[tuple[str, str], str] = {}  # (pk, sk) -> what
        for entry_id in entries:
            wanted[(self._pk, keys.entry_index_sk(entry_id))] = "value"
        if head and state.head is None:
            wanted[(self._pk, keys.HEAD_SK)] = "head"
        scope_ids = {sc.id: sc for sc in scopes}
        for address in values:
            if isinstance(address.scope, EphemeralScope):
                scope_ids.setdefault(address.scope.id, address.scope)
            else:
                wanted[(self._pk, keys.value_sk(address.namespace, address.key))] = "value"
        for scope_id in scope_ids:
            if scope_id not in state.views:
                wanted[(self._pk, keys.retirement_sk(scope_id))] = "boundary"
        for other in attached:
            if other.table != self._table:
                raise StorageValidationError(
                    f"cannot read an item of table {other.table!r} with storage on {self._table!r}"
                )
            wanted[(other.pk, other.sk)] = "attached"
        found = self._batch_get_keys(list(wanted)) if wanted else {}
        read_head: Head | None = None
        for (pk, sk), what in wanted.items():
            item = found.get((pk, sk))
            if what == "head":
                read_head = self._adopt_head(item)
            elif what == "value":
                self._ahead[sk] = item
            elif what == "boundary":
                self._ahead_boundaries[sk] = get_n(item, "seq") if item is not None else 0
        if read_head is not None:
            # Head and boundaries came from one request: a scope the head proves unwritten
            # needs no listing (docs/aws-storage.md, "Reads and caching").
            self._ahead_unwritten.update(
                scope_id
                for scope_id in scope_ids
                if scope_id not in state.views and read_head.proves_unwritten(scope_id)
            )
        return {other: found.get((other.pk, other.sk)) for other in attached}

    # -- commits ------------------------------------------------------------------------------

    def _commit(self, txn: Transaction) -> CommitResult:
        try:
            if isinstance(txn.scope, EphemeralScope):
                return self._commit_scoped(txn, txn.scope)
            return self._commit_session(txn)
        except BaseException:
            self._forget_ahead()
            raise

    def _forget_ahead(self) -> None:
        # A refused or raced commit means others wrote meanwhile: read afresh from now on.
        self._ahead.clear()
        self._ahead_boundaries.clear()
        self._ahead_unwritten.clear()

    def _commit_scoped(self, txn: Transaction, scope: EphemeralScope) -> CommitResult:
        state = self._state
        count = len(txn.writes)
        self._ahead_unwritten.discard(scope.id)
        head = (
            self._allocate_guarded(count, scope.id, txn.guard, txn.guard_seq)
            if txn.guard is not None
            else self._allocate(count, scope.id)
        )
        first = head.last_seq - count + 1
        seqs = tuple(range(first, head.last_seq + 1))
        writes = object_writes(txn.writes, seqs)
        key = self._repo.objects.transaction_key(self.session_id, scope.id, first)
        # One object per transaction: S3 PUT is atomic, so there is no torn state. A crash
        # before it leaves a sequence gap, which is legal.
        with aws_call(f"writing scoped transaction {key!r}"):
            self._repo.s3.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=encode_object(self.session_id, scope.id, writes),
                ContentType="application/json",
            )
        state.bodies[key] = writes
        view = state.views.get(scope.id)
        if view is not None and not view.apply(key, writes):
            del state.views[scope.id]  # another writer interleaved: reload on next read
        return CommitResult(first, seqs, now_ms(), head.stats)

    def _allocate(self, count: int, scope_id: str) -> Head:
        """Reserve `count` sequences for a write to `scope_id` with one atomic ADD (which marks
        the scope written); returns the head after it."""
        state = self._state
        previous = state.head
        done = frozenset(state.done)
        values: dict[str, Any] = {
            ":k": n(count),
            ":g": s(keys.SESSIONS_GSI_PK),
            ":sid": s(self.session_id),
            ":scope": {"SS": [scope_id]},
        }
        expression = (
            f"ADD {LAST_SEQ} :k, {SCOPES_SEQ} :k, {SCOPES} :scope SET gsi1pk = :g, gsi1sk = :sid"
        )
        if done:
            expression += f" DELETE {PENDING} :done"
            values[":done"] = {"SS": sorted(done)}
        # ADD is atomic: concurrent writers get disjoint ranges without a condition.
        with aws_call("allocating sequences"):
            updated = self._ddb.update_item(
                TableName=self._table,
                Key=self._key(keys.HEAD_SK),
                UpdateExpression=expression,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        head = head_from_item(updated.get("Attributes"))
        # Contiguous with what this process last saw: nobody else allocated in between.
        state.observe(head, expected=None if previous is None else previous.last_seq + count)
        state.done -= done
        self._recover(head)  # the returned head names pending cleanups like a read would
        return head

    def _allocate_guarded(
        self, count: int, scope_id: str, guard: Value, guard_seq: int | None = None
    ) -> Head:
        """Reserve `count` sequences only while `guard` exists: one TransactWriteItems.

        Transactions return no values, so the head is set to a known value under a condition
        on the cached one (re-read and retried on a race). A write whose guard was deleted
        after this check gets sequences below the deleting commit's, so a retirement in that
        commit hides it.
        """
        state = self._state
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            head = state.head if state.head is not None else self._read_head()
            done = frozenset(state.done)
            plan = plan_allocation(
                count,
                table=self._table,
                session_id=self.session_id,
                scope_id=scope_id,
                head=head,
                done_markers=done,
                guard=guard,
                guard_seq=guard_seq,
            )
            if self._transact(plan.actions, plan.metas, attempt, guard, guard_seq):
                state.head = plan.new_head
                state.done -= done
                return plan.new_head
        raise StorageConflictError(
            f"session {self.session_id!r}: {MAX_COMMIT_ATTEMPTS} sequence allocations lost to "
            "concurrent writers; nothing was applied"
        )

    def _transact(
        self,
        actions: list[dict[str, Any]],
        metas: list[ActionMeta | None],
        attempt: int,
        guard: Value | None,
        guard_seq: int | None = None,
    ) -> bool:
        """Run one TransactWriteItems: True when applied, False when the head moved (retry)."""
        state = self._state
        try:
            self._ddb.transact_write_items(TransactItems=actions)  # type: ignore[arg-type]
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code == "ValidationException":
                raise StorageValidationError(f"DynamoDB rejected the commit: {exc}") from exc
            if code != "TransactionCanceledException":
                state.head = None
                raise StorageUnavailableError(f"session commit failed: {exc}") from exc
            reasons = cancel_reasons(exc)
            if reasons[:1] != [{"Code": "None"}]:
                state.head = None  # the head condition failed (or we cannot tell)
            raise_cancel_cause(exc, metas, guard, guard_seq)
            current = reasons[0].get("Item") if reasons else None
            if (
                attempt == 0
                and current is not None
                and reasons[0].get("Code") == ("ConditionalCheckFailed")
            ):
                # Another writer moved the head, and the cancellation says to what: the first
                # retry goes at once with fresh sequences (two tool steps of a round racing).
                self._adopt_head(current)
                return False
            # Under heavier contention: re-read the head after a jittered pause, then retry.
            time.sleep(random.uniform(0, 0.002 * 2**attempt))  # nosec B311  # retry jitter, not a secret
            return False
        except BotoCoreError as exc:
            state.head = None
            raise StorageUnavailableError(
                f"session commit outcome unknown (transport failure): {exc}"
            ) from exc
        return True

    def _commit_attached(self, txn: Transaction, attach: AttachedUpdate) -> CommitResult:
        try:
            return self._commit_session(txn, attach)
        except BaseException:
            self._forget_ahead()
            raise

    def _commit_session(
        self, txn: Transaction, attach: AttachedUpdate | None = None
    ) -> CommitResult:
        state = self._state
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            head = state.head if state.head is not None else self._read_head()
            plan = plan_session_commit(
                txn,
                table=self._table,
                session_id=self.session_id,
                head=head,
                done_markers=frozenset(state.done),
            )
            if attach is not None:
                plan.actions.append(attach.action(plan.seqs))
                plan.metas.append(ActionMeta("attached"))
            if not self._transact(plan.actions, plan.metas, attempt, txn.guard, txn.guard_seq):
                self._forget_ahead()
                continue
            for write in txn.writes:  # what was read ahead of these items is stale now
                address = getattr(write, "address", None)
                if isinstance(address, Value):
                    self._ahead.pop(keys.value_sk(address.namespace, address.key), None)
                elif isinstance(write, InsertEntry):
                    self._ahead.pop(keys.entry_index_sk(write.id), None)
            state.head = plan.new_head
            state.done -= plan.done_removed
            for scope_id, boundary in plan.retired.items():
                self._forget_scope(scope_id, boundary)
            for scope_id, boundary in plan.retired.items():
                if scope_id not in plan.unwritten:
                    self._cleanup(scope_id, boundary)
            return CommitResult(plan.seqs[0], plan.seqs, now_ms(), plan.new_head.stats)
        raise StorageConflictError(
            f"session {self.session_id!r}: {MAX_COMMIT_ATTEMPTS} commit attempts lost to "
            "concurrent writers; nothing was applied"
        )

    def _forget_scope(self, scope_id: str, boundary: int) -> None:
        self._state.views.pop(scope_id, None)
        prefix = self._repo.objects.scope_prefix(self.session_id, scope_id)
        for key in [k for k in self._state.bodies if k.startswith(prefix)]:
            if keys.seq_from_key(key) <= boundary:
                del self._state.bodies[key]

    # -- scoped reads -------------------------------------------------------------------------

    def _view(self, scope: EphemeralScope) -> ScopeView:
        """The live state of `scope`, loaded once (boundary, listing, missing objects)."""
        state = self._state
        view = state.views.get(scope.id)
        if view is not None:
            return view
        boundary_sk = keys.retirement_sk(scope.id)
        if boundary_sk in self._ahead_boundaries:
            boundary = self._ahead_boundaries.pop(boundary_sk)
            proven = scope.id in self._ahead_unwritten
            self._ahead_unwritten.discard(scope.id)
            # Still proven by the head as it is now: a write of this process since the read
            # (any handle's) marked the scope on the cached head.
            if proven and state.head is not None and state.head.proves_unwritten(scope.id):
                state.views[scope.id] = ScopeView(scope, boundary)
                return state.views[scope.id]
        else:
            with aws_call(f"reading the retirement boundary of scope {scope.id!r}"):
                found = self._ddb.get_item(
                    TableName=self._table, Key=self._key(boundary_sk), ConsistentRead=True
                )
            boundary = get_n(found["Item"], "seq") if "Item" in found else 0
        view = ScopeView(scope, boundary)
        prefix = self._repo.objects.scope_prefix(self.session_id, scope.id)
        live: list[str] = []
        paginator = self._repo.s3.get_paginator("list_objects_v2")
        with aws_call(f"listing scope {scope.id!r}"):
            # Names sort by sequence: start after the boundary so retired leftovers are skipped.
            for page in paginator.paginate(
                Bucket=self._bucket,
                Prefix=prefix,
                StartAfter=f"{prefix}{keys.seq_text(boundary)}.json",
            ):
                for obj in page.get("Contents", []):
                    name = obj["Key"][len(prefix) :]
                    if name.endswith(".json") and name[: keys.SEQ_DIGITS].isdigit():
                        live.append(obj["Key"])
        missing = [k for k in live if k not in state.bodies]
        if missing:
            self._fetch(scope.id, missing)
        for key in live:
            view.apply(key, state.bodies[key])
        state.views[scope.id] = view
        return view

    def _fetch(self, scope_id: str, object_keys: list[str]) -> None:
        def get(key: str) -> tuple[str, ObjectWrites]:
            with aws_call(f"reading scoped object {key!r}"):
                body = self._repo.s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
            writes = decode_object(body, key=key, session_id=self.session_id, scope_id=scope_id)
            return key, writes

        if len(object_keys) == 1:
            results = [get(object_keys[0])]
        else:
            with ThreadPoolExecutor(max_workers=min(GET_WORKERS, len(object_keys))) as pool:
                results = list(pool.map(get, object_keys))
        for key, writes in results:
            self._state.bodies[key] = writes

    # -- reads --------------------------------------------------------------------------------

    def _get_value(self, address: Value) -> StoredValue | None:
        if isinstance(address.scope, EphemeralScope):
            return self._view(address.scope).state.get_value(address)
        sk = keys.value_sk(address.namespace, address.key)
        if sk in self._ahead:
            item = self._ahead[sk]
        else:
            with aws_call(f"reading {address}"):
                found = self._ddb.get_item(
                    TableName=self._table, Key=self._key(sk), ConsistentRead=True
                )
            item = found.get("Item")
        if item is None:
            return None
        return StoredValue(address, load_json(get_s(item, "v")), get_n(item, "seq"))

    def _scan_values(self, namespace: str, key_prefix: str, scope: Scope) -> list[StoredValue]:
        if isinstance(scope, EphemeralScope):
            return self._view(scope).state.scan_values(namespace, key_prefix, scope)
        items = self._query_prefix(keys.value_scan_prefix(namespace, key_prefix))
        found = [
            StoredValue(
                Value(namespace, get_s(item, "key"), scope),
                load_json(get_s(item, "v")),
                get_n(item, "seq"),
            )
            for item in items
            if get_s(item, "ns") == namespace and get_s(item, "key").startswith(key_prefix)
        ]
        return sorted(found, key=lambda v: v.address.key)

    def _read_list(
        self, address: ValueList, cursor: int | None, order: ListOrder, limit: int
    ) -> list[ListElement]:
        if isinstance(address.scope, EphemeralScope):
            return self._view(address.scope).state.read_list(address, cursor, order, limit)
        deleted_through = self._list_tombstone(address)
        if order == "asc":
            low = max(cursor if cursor is not None else 0, deleted_through) + 1
            high = MAX_SEQ
        else:
            low = deleted_through + 1
            high = cursor - 1 if cursor is not None else MAX_SEQ
        if low > high:
            return []
        prefix = keys.list_prefix(address.namespace, address.key)
        items = self._query(
            "pk = :pk AND sk BETWEEN :lo AND :hi",
            {":lo": s(prefix + keys.seq_text(low)), ":hi": s(prefix + keys.seq_text(high))},
            forward=order == "asc",
            limit=limit,
        )
        return [_element(item) for item in items]

    def _list_tombstone(self, address: ValueList) -> int:
        with aws_call(f"reading {address}"):
            found = self._ddb.get_item(
                TableName=self._table,
                Key=self._key(keys.list_tombstone_sk(address.namespace, address.key)),
                ConsistentRead=True,
            )
        return get_n(found["Item"], "deleted_through") if "Item" in found else 0

    def _get_entries(self, ids: list[str]) -> list[Entry]:
        unique = list(dict.fromkeys(ids))
        index = self._batch_get([keys.entry_index_sk(i) for i in unique])
        seqs = {get_s(item, "id"): get_n(item, "seq") for item in index.values()}
        rows = self._batch_get([keys.entry_sk(seq) for seq in seqs.values()])
        by_id = {get_s(item, "id"): _entry(item) for item in rows.values()}
        return [by_id[i] for i in ids if i in by_id]

    def _scan_entries(self, after_seq: int | None, limit: int | None) -> list[Entry]:
        low = (after_seq or 0) + 1
        if low > MAX_SEQ:
            return []
        items = self._query(
            "pk = :pk AND sk BETWEEN :lo AND :hi",
            {":lo": s(keys.entry_sk(low)), ":hi": s(keys.entry_sk(MAX_SEQ))},
            limit=limit,
        )
        return [_entry(item) for item in items]

    def _get_stats(self) -> StorageStats:
        return self._read_head().stats

    def _snapshot(self) -> Snapshot:
        values = sorted(
            (
                StoredValue(
                    Value(get_s(i, "ns"), get_s(i, "key"), SessionScope()),
                    load_json(get_s(i, "v")),
                    get_n(i, "seq"),
                )
                for i in self._query_prefix(keys.VALUE_PREFIX)
            ),
            key=lambda v: (v.address.namespace, v.address.key),
        )
        tombstones = {
            (get_s(i, "ns"), get_s(i, "key")): get_n(i, "deleted_through")
            for i in self._query_prefix(keys.LIST_TOMBSTONE_PREFIX)
        }
        grouped: dict[tuple[str, str], list[ListElement]] = {}
        for item in self._query_prefix(keys.LIST_PREFIX):
            name = (get_s(item, "ns"), get_s(item, "key"))
            element = _element(item)
            if element.seq > tombstones.get(name, 0):
                grouped.setdefault(name, []).append(element)
        lists = tuple(
            (ValueList(ns, key, SessionScope()), tuple(sorted(rows, key=lambda e: e.seq)))
            for (ns, key), rows in sorted(grouped.items())
        )
        entries = tuple(_entry(i) for i in self._query_prefix(keys.ENTRY_PREFIX))
        usage = tuple(
            UsageRow.from_json(load_json(get_s(i, "row")))
            for i in self._query_prefix(keys.USAGE_PREFIX)
        )
        return Snapshot(tuple(values), lists, entries, usage)

    def _close(self) -> None:
        self._repo.release(self.session_id, self._state)

    # -- DynamoDB helpers ---------------------------------------------------------------------

    def _key(self, sk: str) -> dict[str, Any]:
        return {"pk": s(self._pk), "sk": s(sk)}

    def _query_prefix(self, prefix: str) -> list[Item]:
        return self._query("pk = :pk AND begins_with(sk, :prefix)", {":prefix": s(prefix)})

    def _query(
        self,
        condition: str,
        values: dict[str, Any],
        *,
        forward: bool = True,
        limit: int | None = None,
    ) -> list[Item]:
        """Every item matching `condition` in this partition (strongly consistent, paged)."""
        items: list[Item] = []
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": {":pk": s(self._pk), **values},
            "ConsistentRead": True,
            "ScanIndexForward": forward,
        }
        with aws_call(f"querying session {self.session_id!r}"):
            while True:
                if limit is not None:
                    request["Limit"] = limit - len(items)
                page = self._ddb.query(**request)
                items.extend(page.get("Items", []))
                last = page.get("LastEvaluatedKey")
                if not last or (limit is not None and len(items) >= limit):
                    return items
                request["ExclusiveStartKey"] = last

    def _batch_get_keys(self, wanted: list[tuple[str, str]]) -> dict[tuple[str, str], Item]:
        """Items of this table by (pk, sk), strongly consistent; absent ones are left out."""
        with aws_call(f"reading items of session {self.session_id!r}"):
            keys_wanted = [{"pk": s(pk), "sk": s(sk)} for pk, sk in wanted]
            items = batch_get(self._ddb, self._table, keys_wanted)
        return {(get_s(item, "pk"), get_s(item, "sk")): item for item in items}

    def _batch_get(self, sort_keys: list[str]) -> dict[str, Item]:
        """Items of this session by sort key (strongly consistent; unknown keys are absent)."""
        found = self._batch_get_keys([(self._pk, sk) for sk in sort_keys])
        return {sk: item for (_pk, sk), item in found.items()}


def _element(item: Item) -> ListElement:
    return ListElement(get_n(item, "seq"), load_json(get_s(item, "v")), get_opt_s(item, "tag"))


def _entry(item: Item) -> Entry:
    return Entry(
        get_s(item, "id"),
        get_opt_s(item, "parent"),
        get_s(item, "type"),
        load_json(get_s(item, "data")),
        get_n(item, "seq"),
    )
