"""A tool's durable per-session key-value state (`ToolContext.state`), and where it is stored.

A call sees the session's state as it was when the call started, plus its own writes. Its
writes are committed in the same transaction as the call's result (`state_writes`), so the
state holds exactly the writes of the runs whose results the model saw: a call interrupted
mid-run, stopped at its limit or whose worker died commits none (docs/agent.md, "Tool state").
Values are JSON, capped per value and per session; a write over a cap raises `ToolStateError`,
which a function tool turns into its error result.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Mapping
from typing import Final

from turnkeep.storage import Storage, Value, Write, delete_value, set_value, value
from turnkeep.storage.jsonvalue import JsonValue

STATE_NAMESPACE: Final = "tool_state"
MAX_KEY_CHARS: Final = 200
MAX_VALUE_BYTES: Final = 16_384
"""A value's JSON (UTF-8) may be this long."""
MAX_SESSION_BYTES: Final = 262_144
"""All of a session's keys and values together may be this long."""
MAX_WRITES_PER_CALL: Final = 64
"""Keys one call may set or delete (its writes are one storage transaction)."""


class ToolStateError(ValueError):
    """A state write that cannot be kept (bad key, not JSON, over a cap, call ended); one line."""


def state_address(key: str) -> Value:
    """Where the value of `key` lives: a session-scope value, deleted with the session."""
    return value(STATE_NAMESPACE, key)


def load_state(storage: Storage) -> dict[str, JsonValue]:
    """The session's tool state as stored now (one scan of its namespace)."""
    return {stored.address.key: stored.value for stored in storage.scan_values(STATE_NAMESPACE)}


def _size(key: str, encoded: str) -> int:
    return len(key.encode("utf-8")) + len(encoded.encode("utf-8"))


def _encode(key: str, item: object) -> str:
    try:
        return json.dumps(item, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ToolStateError(
            f"state.set({key!r}): the value is not JSON ({type(item).__name__}: {exc})"
        ) from None


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        raise ToolStateError(
            f"state key {key!r} is invalid: use a string of 1-{MAX_KEY_CHARS} characters"
        )
    if "\x00" in key:
        raise ToolStateError(f"state key {key!r} holds a NUL character")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolStateError(f"state key {key!r} holds a lone surrogate") from None
    return key


class ToolState:
    """The session's key-value store as one tool call sees it: `get`, `set`, `delete`, `keys`.

    `loader` reads the stored state on first use (a call that never touches its state costs no
    read). Thread-safe; once `seal`ed (the call ended) every write raises `ToolStateError`.
    """

    # Deleted keys are kept beside the written ones: JSON null is a value, not a delete.
    __slots__ = ("_changes", "_deleted", "_loader", "_lock", "_sealed", "_values")

    def __init__(
        self,
        values: Mapping[str, JsonValue] | None = None,
        *,
        loader: Callable[[], Mapping[str, JsonValue]] | None = None,
    ) -> None:
        self._values: dict[str, JsonValue] | None = dict(values) if values is not None else None
        self._loader = loader
        self._changes: dict[str, JsonValue] = {}
        self._deleted: set[str] = set()
        self._lock = threading.Lock()
        self._sealed = False

    def _current(self) -> dict[str, JsonValue]:
        if self._values is None:
            self._values = dict(self._loader()) if self._loader is not None else {}
        return self._values

    def get(self, key: str, default: JsonValue = None) -> JsonValue:
        """The value of `key` (a copy: changing it changes nothing stored), else `default`."""
        with self._lock:
            current = self._current()
            if key not in current:
                return default
            return copy.deepcopy(current[key])

    def keys(self) -> list[str]:
        """The keys set now, sorted."""
        with self._lock:
            return sorted(self._current())

    def set(self, key: str, item: JsonValue) -> None:
        """Set `key` to the JSON value `item`; ToolStateError over a cap or for a non-JSON one."""
        _check_key(key)
        encoded = _encode(key, item)
        size = len(encoded.encode("utf-8"))
        if size > MAX_VALUE_BYTES:
            raise ToolStateError(
                f"state.set({key!r}): the value is {size} bytes as JSON, over "
                f"the limit of {MAX_VALUE_BYTES} bytes per value"
            )
        with self._lock:
            self._writable()
            self._count(key)
            current = self._current()
            others = sum(_size(k, _encode(k, v)) for k, v in current.items() if k != key)
            total = others + _size(key, encoded)
            if total > MAX_SESSION_BYTES:
                raise ToolStateError(
                    f"state.set({key!r}): the session's state would be {total} bytes, over the "
                    f"limit of {MAX_SESSION_BYTES} bytes per session; delete keys it no longer "
                    "needs"
                )
            current[key] = json.loads(encoded)
            self._changes[key] = current[key]
            self._deleted.discard(key)

    def delete(self, key: str) -> None:
        """Remove `key` (absent is fine)."""
        _check_key(key)
        with self._lock:
            self._writable()
            self._count(key)
            self._current().pop(key, None)
            self._changes.pop(key, None)
            self._deleted.add(key)

    def _count(self, key: str) -> None:
        touched = len(self._changes) + len(self._deleted)
        if key not in self._changes and key not in self._deleted and touched >= MAX_WRITES_PER_CALL:
            raise ToolStateError(
                f"state: one tool call may change at most {MAX_WRITES_PER_CALL} keys"
            )

    def _writable(self) -> None:
        if self._sealed:
            raise ToolStateError(
                "the tool call has ended (or was stopped at its limit): its state writes are "
                "no longer kept"
            )

    def snapshot(self) -> dict[str, JsonValue]:
        """The state as this call sees it (loaded if it was not yet): what a worker receives."""
        with self._lock:
            return dict(self._current())

    def changes(self) -> tuple[dict[str, JsonValue], frozenset[str]]:
        """(keys set with their values, keys deleted) by this call so far."""
        with self._lock:
            return dict(self._changes), frozenset(self._deleted)

    def absorb(self, written: Mapping[str, JsonValue], deleted: frozenset[str]) -> None:
        """Take over the writes another copy of this state made (a worker process's)."""
        if not written and not deleted:
            return
        with self._lock:
            self._writable()
            current = self._current()
            for key in deleted:
                current.pop(key, None)
                self._changes.pop(key, None)
                self._deleted.add(key)
            for key, item in written.items():
                current[key] = item
                self._changes[key] = item
                self._deleted.discard(key)

    def seal(self, *, discard: bool = False) -> None:
        """End the call's writes; `discard` drops those it made (a call stopped at its limit)."""
        with self._lock:
            self._sealed = True
            if discard:
                self._changes.clear()
                self._deleted.clear()

    def __reduce__(self) -> tuple[object, ...]:
        # Crosses to a worker process as its values: the loader holds the step's storage.
        return (ToolState, (self.snapshot(),))


def state_writes(state: ToolState) -> list[Write]:
    """The storage writes of a call's state changes (committed with the call's result)."""
    written, deleted = state.changes()
    writes: list[Write] = [delete_value(state_address(key)) for key in sorted(deleted)]
    writes.extend(set_value(state_address(key), item) for key, item in sorted(written.items()))
    return writes
