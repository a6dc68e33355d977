"""Write constructors and the one-scope transaction rule."""

from __future__ import annotations

import math
from collections.abc import Container, Sequence
from dataclasses import dataclass, field

from turnkeep.storage.addresses import Value, ValueList
from turnkeep.storage.errors import (
    EntryConflictError,
    StorageValidationError,
    TransactionScopeError,
)
from turnkeep.storage.jsonvalue import JsonValue, dump_json, load_json
from turnkeep.storage.scopes import (
    SESSION_SCOPE,
    EphemeralScope,
    Scope,
    SessionScope,
    describe_scope,
    validate_scope_id,
)


@dataclass(frozen=True, slots=True)
class UsageRow:
    """Token and cost usage of one model call; rows feed the session stats.

    `cost_micros` is integer micro-dollars (no floats in storage, docs/usage.md); `estimated`
    marks counts the provider estimated because the server reported none; `op_id` names the
    turn the call belongs to (None: rows written before turns were recorded on them)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_micros: int = 0
    model: str | None = None
    estimated: bool = False
    op_id: str | None = None

    def __post_init__(self) -> None:
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "cost_micros",
        ):
            count = getattr(self, name)
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise StorageValidationError(f"usage {name} must be an int >= 0, got {count!r}")
        if self.model is not None and not isinstance(self.model, str):
            raise StorageValidationError("usage model must be a string or None")
        if not isinstance(self.estimated, bool):
            raise StorageValidationError("usage estimated must be a bool")
        if self.op_id is not None and not isinstance(self.op_id, str):
            raise StorageValidationError("usage op_id must be a string or None")

    def to_json(self) -> dict[str, JsonValue]:
        """Plain dict form used by the persistent backends."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cost_micros": self.cost_micros,
            "model": self.model,
            "estimated": self.estimated,
            "op": self.op_id,
        }

    @classmethod
    def from_json(cls, data: dict[str, JsonValue]) -> UsageRow:
        """Inverse of to_json; also reads the rows of earlier formats, whose cost was a float
        `cost_usd` (converted to micro-dollars, rounded half up)."""
        model, op = data.get("model"), data.get("op")
        return cls(
            input_tokens=int(data.get("input_tokens") or 0),  # type: ignore[arg-type]
            output_tokens=int(data.get("output_tokens") or 0),  # type: ignore[arg-type]
            cache_read_tokens=int(data.get("cache_read_tokens") or 0),  # type: ignore[arg-type]
            cache_write_tokens=int(data.get("cache_write_tokens") or 0),  # type: ignore[arg-type]
            cost_micros=_cost_micros(data),
            model=model if isinstance(model, str) else None,
            estimated=data.get("estimated") is True,
            op_id=op if isinstance(op, str) else None,
        )


def _cost_micros(data: dict[str, JsonValue]) -> int:
    micros = data.get("cost_micros")
    if micros is not None:
        return int(micros)  # type: ignore[arg-type]
    return usd_to_micros(data.get("cost_usd") or 0)  # type: ignore[arg-type]


def usd_to_micros(usd: float | int) -> int:
    """A float dollar figure of an earlier format as integer micro-dollars (half up)."""
    if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not math.isfinite(usd):
        raise StorageValidationError(f"usage cost_usd must be a finite number, got {usd!r}")
    return max(0, math.floor(usd * 1_000_000 + 0.5))


@dataclass(frozen=True, slots=True)
class SetValue:
    """Replace the value at `address`."""

    address: Value
    value_json: str

    @property
    def value(self) -> JsonValue:
        """The value as a fresh JSON object."""
        return load_json(self.value_json)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class DeleteValue:
    """Delete the value at `address` (absent is fine)."""

    address: Value


@dataclass(frozen=True, slots=True)
class AppendList:
    """Append one element (with an optional tag) to the list at `address`."""

    address: ValueList
    element_json: str
    tag: str | None = None

    @property
    def element(self) -> JsonValue:
        """The element as a fresh JSON object."""
        return load_json(self.element_json)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class DeleteList:
    """Delete the whole list at `address` (absent is fine)."""

    address: ValueList


@dataclass(frozen=True, slots=True)
class RetireScope:
    """End the current lifetime of an ephemeral scope: delete all its values and lists."""

    scope: EphemeralScope


@dataclass(frozen=True, slots=True)
class InsertEntry:
    """Insert one transcript entry; entries form a tree through parent ids."""

    id: str
    parent_id: str | None
    type: str
    data_json: str

    @property
    def data(self) -> JsonValue:
        """The payload as a fresh JSON object."""
        return load_json(self.data_json)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class InsertUsage:
    """Record one usage row."""

    row: UsageRow


Write = SetValue | DeleteValue | AppendList | DeleteList | RetireScope | InsertEntry | InsertUsage
ScopedWrite = SetValue | DeleteValue | AppendList | DeleteList

SCOPED_WRITE_TYPES = (SetValue, DeleteValue, AppendList, DeleteList)
"""The classes of ScopedWrite, for isinstance."""
_ALL_TYPES = (*SCOPED_WRITE_TYPES, RetireScope, InsertEntry, InsertUsage)


def _require(addr: object, kind: type[Value] | type[ValueList], fn: str) -> None:
    if not isinstance(addr, kind):
        want = "value(...)" if kind is Value else "value_list(...)"
        raise StorageValidationError(f"{fn} needs an address made by {want}, got {addr!r}")


def set_value(address: Value, v: object) -> SetValue:
    """Write that replaces the value at `address` with JSON value `v`."""
    _require(address, Value, "set_value")
    return SetValue(address, dump_json(v, what=f"the value for {address}"))


def delete_value(address: Value) -> DeleteValue:
    """Write that deletes the value at `address`."""
    _require(address, Value, "delete_value")
    return DeleteValue(address)


def append_list(address: ValueList, element: object, tag: str | None = None) -> AppendList:
    """Write that appends `element` to the list at `address`, tagged `tag` if given."""
    _require(address, ValueList, "append_list")
    if tag is not None and (not isinstance(tag, str) or tag == ""):
        raise StorageValidationError(f"list tag must be a non-empty string, got {tag!r}")
    if tag is not None:
        validate_text(tag, what="list tag")
    return AppendList(address, dump_json(element, what=f"the element for {address}"), tag)


def delete_list(address: ValueList) -> DeleteList:
    """Write that deletes the whole list at `address`."""
    _require(address, ValueList, "delete_list")
    return DeleteList(address)


def retire_scope(scope: Scope) -> RetireScope:
    """Session-scoped write that retires `scope`; the session scope cannot be retired."""
    if isinstance(scope, SessionScope):
        raise TransactionScopeError(
            "retire_scope(SESSION_SCOPE) is rejected: the session scope never retires"
        )
    if not isinstance(scope, EphemeralScope):
        raise TransactionScopeError(f"retire_scope needs ephemeral_scope(id), got {scope!r}")
    validate_scope_id(scope.id)
    return RetireScope(scope)


def validate_text(text: object, *, what: str) -> str:
    """Return `text` if it is a string encodable as UTF-8, else raise naming `what`."""
    if not isinstance(text, str):
        raise StorageValidationError(f"{what} must be a string, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StorageValidationError(f"{what} {text!r} holds a lone surrogate") from exc
    return text


def insert_entry(
    id: str,
    parent_id: str | None,
    type: str,
    data: object = None,
) -> InsertEntry:
    """Session-scoped write that inserts a transcript entry under `parent_id` (None = root)."""
    if validate_text(id, what="entry id") == "":
        raise StorageValidationError("entry id must not be empty")
    if parent_id is not None and validate_text(parent_id, what="entry parent id") == "":
        raise StorageValidationError(f"entry {id!r}: parent id must be None or non-empty")
    if validate_text(type, what="entry type") == "":
        raise StorageValidationError(f"entry {id!r}: type must not be empty")
    if parent_id == id:
        raise EntryConflictError(f"entry {id!r} cannot be its own parent")
    return InsertEntry(id, parent_id, type, dump_json(data, what=f"the data of entry {id!r}"))


def insert_usage(row: UsageRow) -> InsertUsage:
    """Session-scoped write that records a usage row."""
    if not isinstance(row, UsageRow):
        raise StorageValidationError(f"insert_usage needs a UsageRow, got {type(row).__name__}")
    return InsertUsage(row)


@dataclass(frozen=True, slots=True)
class Transaction:
    """Validated writes of one scope, in order."""

    scope: Scope
    writes: tuple[Write, ...]
    entry_ids: tuple[str, ...] = field(default=())
    guard: Value | None = None
    """Commit only while this session-scoped value exists (checked atomically with the commit)."""
    guard_seq: int | None = None
    """With `guard`: commit only while the guard value is still the one stored at this sequence
    (a compare-and-set on it)."""

    @property
    def is_session(self) -> bool:
        """True when the transaction commits to the session (main) log."""
        return isinstance(self.scope, SessionScope)


def write_scope(write: Write) -> Scope:
    """The scope a write belongs to (retirement, entries and usage are session-scoped)."""
    if isinstance(write, SCOPED_WRITE_TYPES):
        return write.address.scope
    return SESSION_SCOPE


def build_transaction(
    writes: Sequence[Write], guard: Value | None = None, guard_seq: int | None = None
) -> Transaction:
    """Validate the one-scope rule, the guard and in-transaction entry ids; raise before any
    mutation."""
    if isinstance(writes, (str, bytes)) or not isinstance(writes, Sequence):
        raise StorageValidationError("commit takes a sequence of writes")
    if guard is not None and (
        not isinstance(guard, Value) or not isinstance(guard.scope, SessionScope)
    ):
        raise StorageValidationError(
            f"a commit guard must be a session-scoped value(...) address, got {guard!r}"
        )
    ephemeral_ids: list[str] = []
    txn_scope: Scope = SESSION_SCOPE
    has_session = False
    for index, write in enumerate(writes):
        if not isinstance(write, _ALL_TYPES):
            raise StorageValidationError(
                f"write #{index} is not a storage write (use set_value, append_list, ...): "
                f"{write!r}"
            )
        scope = write_scope(write)
        if isinstance(scope, EphemeralScope):
            if scope.id not in ephemeral_ids:
                ephemeral_ids.append(scope.id)
                txn_scope = scope
        else:
            has_session = True
    if ephemeral_ids and has_session:
        raise TransactionScopeError(
            "a transaction holds writes of one scope: session writes (entries, usage, "
            "retirements, session values) cannot share it with writes to "
            + ", ".join(describe_scope(EphemeralScope(i)) for i in ephemeral_ids)
        )
    if len(ephemeral_ids) > 1:
        raise TransactionScopeError(
            "an ephemeral transaction holds writes of exactly one scope id; got "
            + ", ".join(repr(i) for i in ephemeral_ids)
        )
    entry_ids: list[str] = []
    seen: set[str] = set()
    for write in writes:
        if isinstance(write, InsertEntry):
            if write.id in seen:
                raise EntryConflictError(f"entry id {write.id!r} appears twice in one transaction")
            seen.add(write.id)
            entry_ids.append(write.id)
    if guard_seq is not None and (
        guard is None
        or isinstance(guard_seq, bool)
        or not isinstance(guard_seq, int)
        or guard_seq < 1
    ):
        raise StorageValidationError(
            f"guard_seq needs a guard and a sequence >= 1, got {guard_seq!r}"
        )
    return Transaction(txn_scope, tuple(writes), tuple(entry_ids), guard, guard_seq)


def missing_parents(txn: Transaction, exists: Container[str]) -> list[tuple[str, str]]:
    """(entry id, parent id) pairs whose parent is neither in `exists` nor earlier in `txn`.

    `exists` is only probed, never copied, so a check costs O(entries of `txn`) whatever the
    session's size (a resident backend passes its entry dict itself)."""
    earlier: set[str] = set()
    missing: list[tuple[str, str]] = []
    for write in txn.writes:
        if isinstance(write, InsertEntry):
            parent = write.parent_id
            if parent is not None and parent not in earlier and parent not in exists:
                missing.append((write.id, parent))
            earlier.add(write.id)
    return missing
