"""Addresses of values and lists: namespace, key and scope."""

from __future__ import annotations

from dataclasses import dataclass

from turnkeep.storage.errors import StorageValidationError
from turnkeep.storage.scopes import SESSION_SCOPE, EphemeralScope, Scope, SessionScope


def _check_part(name: str, part: object, *, allow_empty: bool) -> str:
    if not isinstance(part, str):
        raise StorageValidationError(f"{name} must be a string, got {type(part).__name__}")
    if not allow_empty and part == "":
        raise StorageValidationError(f"{name} must not be empty")
    try:
        part.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StorageValidationError(f"{name} {part!r} holds a lone surrogate") from exc
    if "\x00" in part:
        raise StorageValidationError(f"{name} {part!r} holds a NUL character")
    return part


def _check_scope(scope: object) -> Scope:
    if not isinstance(scope, (SessionScope, EphemeralScope)):
        raise StorageValidationError(
            f"scope must be SESSION_SCOPE or ephemeral_scope(id), got {scope!r}"
        )
    return scope


@dataclass(frozen=True, slots=True)
class Value:
    """Address of one scalar JSON value."""

    namespace: str
    key: str
    scope: Scope

    def __str__(self) -> str:
        return f"value {self.namespace!r}/{self.key!r} in {_scope_text(self.scope)}"


@dataclass(frozen=True, slots=True)
class ValueList:
    """Address of one append-only list of JSON elements."""

    namespace: str
    key: str
    scope: Scope

    def __str__(self) -> str:
        return f"list {self.namespace!r}/{self.key!r} in {_scope_text(self.scope)}"


Address = Value | ValueList


def _scope_text(scope: Scope) -> str:
    return "session scope" if isinstance(scope, SessionScope) else f"scope {scope.id!r}"


def value(namespace: str, key: str = "", scope: Scope = SESSION_SCOPE) -> Value:
    """Address a scalar value; scope defaults to the session scope."""
    return Value(
        _check_part("namespace", namespace, allow_empty=False),
        _check_part("key", key, allow_empty=True),
        _check_scope(scope),
    )


def value_list(namespace: str, key: str = "", scope: Scope = SESSION_SCOPE) -> ValueList:
    """Address a list; scope defaults to the session scope."""
    return ValueList(
        _check_part("namespace", namespace, allow_empty=False),
        _check_part("key", key, allow_empty=True),
        _check_scope(scope),
    )
