"""Scope identity: the session scope and reusable, named ephemeral scopes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import quote

from turnkeep.storage.errors import InvalidScopeError

MAX_QUOTED_SCOPE_ID_CHARS: Final = 180


@dataclass(frozen=True, slots=True)
class SessionScope:
    """The durable scope of a session; it is never retired."""

    kind: Literal["session"] = "session"


@dataclass(frozen=True, slots=True)
class EphemeralScope:
    """A named lifetime of progress state; equal ids are the same scope."""

    id: str
    kind: Literal["ephemeral"] = "ephemeral"

    def __post_init__(self) -> None:
        # The class is public: an id built without ephemeral_scope() must not slip through
        # (an empty id would alias the session scope's physical key '').
        validate_scope_id(self.id)


Scope = SessionScope | EphemeralScope

SESSION_SCOPE: Final = SessionScope()


def quote_scope_id(scope_id: str) -> str:
    """Percent-encode a scope id like JavaScript's encodeURIComponent (no safe chars)."""
    return quote(scope_id, safe="")


def validate_scope_id(scope_id: object) -> str:
    """Return `scope_id` if it is a usable scope id, else raise InvalidScopeError."""
    if not isinstance(scope_id, str):
        raise InvalidScopeError(f"scope id must be a string, got {type(scope_id).__name__}")
    if scope_id == "":
        raise InvalidScopeError("scope id must not be empty")
    try:
        scope_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidScopeError(
            f"scope id {scope_id!r} is not well-formed Unicode (lone surrogate)"
        ) from exc
    quoted = quote_scope_id(scope_id)
    if len(quoted) > MAX_QUOTED_SCOPE_ID_CHARS:
        raise InvalidScopeError(
            f"scope id {scope_id[:40]!r}... encodes to {len(quoted)} characters; "
            f"the limit is {MAX_QUOTED_SCOPE_ID_CHARS}"
        )
    return scope_id


def ephemeral_scope(scope_id: str) -> EphemeralScope:
    """Return the ephemeral scope named `scope_id` (validated)."""
    return EphemeralScope(scope_id)


def scope_key(scope: Scope) -> str:
    """Physical scope identity: '' for the session scope, else the scope id."""
    return scope.id if isinstance(scope, EphemeralScope) else ""


def scope_from_key(key: str) -> Scope:
    """Inverse of scope_key."""
    return SESSION_SCOPE if key == "" else EphemeralScope(key)


def describe_scope(scope: Scope) -> str:
    """Human-readable scope name for error messages."""
    return "session scope" if isinstance(scope, SessionScope) else f"ephemeral scope {scope.id!r}"
