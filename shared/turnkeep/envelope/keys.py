"""The reserved meta keys, who owns each, and how a value is validated or read back.

Host keys are written only by the host's full-set PUT; worker keys only by field-level worker
writes (the turn harness and the working-notes tools). The two sets are disjoint. Writes are
validated strictly (a typed `MetaValidationError` naming the key); stored values are read
leniently: anything that would fail validation (poison) reads back as unset, never an error.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from turnkeep.envelope import caps
from turnkeep.envelope.errors import MetaValidationError
from turnkeep.envelope.model import MetaScalar
from turnkeep.session_ids import session_id_problem
from turnkeep.turn_rules import TURN_STATUSES, TurnStatus

logger = logging.getLogger(__name__)

_INT64_MAX: Final = 2**63 - 1

REASONING_EFFORTS: Final = frozenset({"none", "minimal", "low", "medium", "high"})


class _Invalid(Exception):
    """Internal: why a value does not fit its key."""


def utf8_len(text: str) -> int:
    """UTF-8 byte length of `text`; lone surrogates are invalid (they cannot be stored)."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise _Invalid("is not valid Unicode text (it contains a lone surrogate)") from exc


def _check_str(value: object, max_bytes: int) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"must be a string, got {type(value).__name__}")
    size = utf8_len(value)
    if size > max_bytes:
        raise _Invalid(f"is {size} bytes of UTF-8; the cap is {max_bytes} bytes")
    return value


def _check_int(value: object, minimum: int = 0) -> int:
    # bool is an int subclass in Python; a flag is never a counter.
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"must be an integer, got {type(value).__name__}")
    if not minimum <= value <= _INT64_MAX:
        raise _Invalid(f"must be between {minimum} and {_INT64_MAX}, got {value}")
    return value


KeyOwner = Literal["host", "worker"]
"""Who writes a reserved key: the host (the app's PUT) or the turn worker."""


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One reserved key: its owner, its largest stored size, and its validator."""

    name: str
    owner: KeyOwner
    max_bytes: int
    check: Callable[[object], MetaScalar | None]
    doc: str


def _text(max_bytes: int) -> Callable[[object], MetaScalar | None]:
    return lambda v: _check_str(v, max_bytes)


def _choice(choices: frozenset[str]) -> Callable[[object], MetaScalar | None]:
    def check(value: object) -> MetaScalar:
        text = _check_str(value, caps.IDENT_MAX_BYTES)
        if text not in choices:
            raise _Invalid(f"must be one of {', '.join(sorted(choices))}, got {text!r}")
        return text

    return check


def _counter(value: object) -> MetaScalar:
    return _check_int(value)


def _flag(value: object) -> MetaScalar:
    if not isinstance(value, bool):
        raise _Invalid(f"must be a boolean, got {type(value).__name__}")
    return value


def _cursor(value: object) -> MetaScalar:
    # A global-sequence number, or an opaque string cursor of another stream.
    if isinstance(value, str):
        return _check_str(value, caps.IDENT_MAX_BYTES)
    return _check_int(value)


def _json_object(max_bytes: int) -> Callable[[object], MetaScalar | None]:
    def check(value: object) -> MetaScalar:
        text = _check_str(value, max_bytes)
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise _Invalid("must be a JSON object encoded as a string (it is not JSON)") from exc
        if not isinstance(parsed, dict):
            raise _Invalid("must be a JSON object encoded as a string")
        return text

    return check


def _json_text_array(max_bytes: int) -> Callable[[object], MetaScalar | None]:
    def check(value: object) -> MetaScalar:
        text = _check_str(value, max_bytes)
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise _Invalid("must be a JSON array of strings (it is not JSON)") from exc
        if not isinstance(parsed, list) or not all(isinstance(x, str) for x in parsed):
            raise _Invalid("must be a JSON array of strings encoded as a string")
        return text

    return check


def sanitize_working_notes(value: object) -> str | None:
    """The notes to keep: trimmed text within the cap; empty, non-text or over-cap -> None."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    try:
        size = utf8_len(text)
    except _Invalid:
        return None
    return text if size <= caps.WORKING_NOTES_MAX_BYTES else None


def _session_ref(value: object) -> MetaScalar:
    problem = session_id_problem(value)
    if problem is not None:
        raise _Invalid(problem)
    return value  # type: ignore[return-value]  # the rule admits only str


def _notes(value: object) -> MetaScalar | None:
    # Trim, then: empty = clear (None, the "present empty string" clear, docs/envelope.md); over-cap
    # is an error, never a truncation.
    if not isinstance(value, str):
        raise _Invalid(f"must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        return None
    size = utf8_len(text)
    if size > caps.WORKING_NOTES_MAX_BYTES:
        raise _Invalid(
            f"is {size} bytes of UTF-8 after trimming; the cap is "
            f"{caps.WORKING_NOTES_MAX_BYTES} bytes (notes are never truncated)"
        )
    return text


_SPECS: Final[tuple[KeySpec, ...]] = (
    # -- host keys: the host PUT writes the full set (absent = clear) --------------------------
    KeySpec("title", "host", caps.TITLE_MAX_BYTES, _text(caps.TITLE_MAX_BYTES), "session title"),
    KeySpec("personaId", "host", caps.IDENT_MAX_BYTES, _text(caps.IDENT_MAX_BYTES), "persona id"),
    KeySpec(
        "personaSnapshot",
        "host",
        caps.PERSONA_SNAPSHOT_MAX_BYTES,
        _text(caps.PERSONA_SNAPSHOT_MAX_BYTES),
        "the persona's standing orders, folded after the default system prompt",
    ),
    KeySpec(
        "attachedSkills",
        "host",
        caps.ATTACHED_SKILLS_MAX_BYTES,
        _json_text_array(caps.ATTACHED_SKILLS_MAX_BYTES),
        "JSON array of skill texts, folded last",
    ),
    KeySpec("selectedModel", "host", caps.IDENT_MAX_BYTES, _text(caps.IDENT_MAX_BYTES), "model id"),
    KeySpec(
        "reasoningEffort",
        "host",
        caps.IDENT_MAX_BYTES,
        _choice(REASONING_EFFORTS),
        "none | minimal | low | medium | high",
    ),
    KeySpec("archived", "host", 5, _flag, "the user archived the session"),
    KeySpec(
        "toolApproval",
        "host",
        caps.IDENT_MAX_BYTES,
        _text(caps.IDENT_MAX_BYTES),
        "comma-separated tool names whose calls wait for a person's approval ('*' = every "
        "tool); host-owned, so the agent cannot change it (docs/approvals.md)",
    ),
    # -- worker keys: field-level writes by the harness and the notes tools --------------------
    KeySpec(
        "workingNotes",
        "worker",
        caps.WORKING_NOTES_MAX_BYTES,
        _notes,
        "agent-authored working notes (only the working_notes_* tools write it)",
    ),
    KeySpec(
        "turnStatus",
        "worker",
        caps.IDENT_MAX_BYTES,
        _choice(TURN_STATUSES),
        "idle | running | cancelling | awaiting_approval | completed | failed | aborted",
    ),
    KeySpec("turnRunId", "worker", caps.IDENT_MAX_BYTES, _text(caps.IDENT_MAX_BYTES), "turn id"),
    KeySpec(
        "turnFinishing",
        "worker",
        caps.IDENT_MAX_BYTES,
        _text(caps.IDENT_MAX_BYTES),
        "turn id whose completion is being committed: a cancel can no longer take effect",
    ),
    KeySpec(
        "turnStreamCursor",
        "worker",
        caps.IDENT_MAX_BYTES,
        _cursor,
        "global-sequence cursor (int) or opaque string cursor of the turn's stream",
    ),
    KeySpec(
        "usage",
        "worker",
        caps.USAGE_MAX_BYTES,
        _json_object(caps.USAGE_MAX_BYTES),
        "JSON object of usage counters",
    ),
    KeySpec(
        "parentSessionId",
        "worker",
        caps.IDENT_MAX_BYTES,
        _session_ref,
        "a child session's parent (sub-agent calls, docs/agent.md): set when the envelope is "
        "created, so listings filter children out and a delete finds them in one listing",
    ),
    KeySpec("turnStartedAt", "worker", caps.INT_MAX_TEXT_BYTES, _counter, "turn start, epoch ms"),
    KeySpec("turnFinishedAt", "worker", caps.INT_MAX_TEXT_BYTES, _counter, "turn end, epoch ms"),
    KeySpec(
        "turnError",
        "worker",
        caps.TURN_ERROR_MAX_BYTES,
        _text(caps.TURN_ERROR_MAX_BYTES),
        "why the last turn failed",
    ),
    KeySpec(
        "turnStepCount", "worker", caps.INT_MAX_TEXT_BYTES, _counter, "steps of the current turn"
    ),
    KeySpec(
        "turnRateWindowStartedAt",
        "worker",
        caps.INT_MAX_TEXT_BYTES,
        _counter,
        "start of the turn-start rate-limit window, epoch ms",
    ),
    KeySpec(
        "turnRateWindowCount",
        "worker",
        caps.INT_MAX_TEXT_BYTES,
        _counter,
        "turns started in the current rate-limit window",
    ),
)

KEY_SPECS: Final[Mapping[str, KeySpec]] = {s.name: s for s in _SPECS}
HOST_META_KEYS: Final = frozenset(s.name for s in _SPECS if s.owner == "host")
WORKER_META_KEYS: Final = frozenset(s.name for s in _SPECS if s.owner == "worker")
RESERVED_META_KEYS: Final = HOST_META_KEYS | WORKER_META_KEYS

_ID_FORBIDDEN: Final = re.compile(r"[\x00-\x1f\x7f]")


def _fail(what: str, reason: str) -> MetaValidationError:
    return MetaValidationError(f"{what} {reason}")


def validate_id(value: object, what: str, max_bytes: int) -> str:
    """A session or owner id: non-empty text, no control characters, within `max_bytes`."""
    if not isinstance(value, str):
        raise _fail(what, f"must be a string, got {type(value).__name__}")
    if not value:
        raise _fail(what, "must not be empty")
    if _ID_FORBIDDEN.search(value):
        raise _fail(what, f"{value!r} contains a control character")
    try:
        size = utf8_len(value)
    except _Invalid as exc:
        raise _fail(what, str(exc)) from None
    if size > max_bytes:
        raise _fail(what, f"is {size} bytes of UTF-8; the cap is {max_bytes} bytes")
    return value


def validate_session_id(value: object) -> str:
    """A session id by the one rule storage and the API use too (`turnkeep.session_ids`),
    or `MetaValidationError`."""
    problem = session_id_problem(value)
    if problem is not None:
        raise MetaValidationError(problem)
    return value  # type: ignore[return-value]  # the rule admits only str


def validate_owner_id(value: object) -> str:
    """A valid owner (user) id, or `MetaValidationError`."""
    return validate_id(value, "owner id", caps.OWNER_ID_MAX_BYTES)


def _check_value(key: str, value: object) -> MetaScalar | None:
    try:
        return KEY_SPECS[key].check(value)
    except _Invalid as exc:
        raise _fail(f"meta key {key!r}:", f"value {exc}") from None


_NAME_MAX_CHARS: Final = 64


def brief_key(name: str) -> str:
    """A caller-supplied key, shortened so an error never echoes a huge one."""
    if len(name) <= _NAME_MAX_CHARS:
        return name
    return f"{name[: _NAME_MAX_CHARS - 16]}…({len(name)} chars)"


def _reject_key(key: object, allowed_owner: KeyOwner) -> MetaValidationError:
    if not isinstance(key, str):
        return MetaValidationError(f"meta keys must be strings, got {type(key).__name__}")
    name = brief_key(key)
    if key == "workingNotes" and allowed_owner == "host":
        return MetaValidationError(
            "meta key 'workingNotes' is written only by the working_notes_* tools; "
            "a host PUT may not set it (omit it: the PUT never touches worker keys)",
            code="worker_key",
            field=key,
        )
    spec = KEY_SPECS.get(key)
    if spec is None:
        allowed = HOST_META_KEYS if allowed_owner == "host" else WORKER_META_KEYS
        return MetaValidationError(
            f"unknown meta key {name!r}; {allowed_owner} keys are: {', '.join(sorted(allowed))}",
            code="unknown_meta_key",
            field=name,
        )
    owner = "the turn worker" if spec.owner == "worker" else "the host"
    return MetaValidationError(
        f"meta key {key!r} is owned by {owner}; a {allowed_owner} "
        f"{'PUT' if allowed_owner == 'host' else 'write'} may not set it",
        code=f"{spec.owner}_key",
        field=key,
    )


def meta_size_bytes(meta: Mapping[str, MetaScalar]) -> int:
    """UTF-8 bytes of names plus values (numbers and booleans as their text)."""
    total = 0
    for key, value in meta.items():
        text = value if isinstance(value, str) else json.dumps(value)
        total += len(key.encode("utf-8")) + len(text.encode("utf-8", "surrogatepass"))
    return total


def _check_total(meta: Mapping[str, MetaScalar], what: str) -> None:
    size = meta_size_bytes(meta)
    if size > caps.META_MAX_BYTES:
        raise MetaValidationError(
            f"{what} is {size} bytes; the whole-meta cap is {caps.META_MAX_BYTES} bytes"
        )


def _as_mapping(value: object, what: str) -> Mapping[object, object]:
    if not isinstance(value, Mapping):
        raise MetaValidationError(f"{what} must be a mapping, got {type(value).__name__}")
    return value


def validate_host_meta(meta: object) -> dict[str, MetaScalar]:
    """The full host set to store; a `None` value means absent (cleared)."""
    result: dict[str, MetaScalar] = {}
    for key, value in _as_mapping(meta, "host meta").items():
        if not isinstance(key, str) or key not in HOST_META_KEYS:
            raise _reject_key(key, "host")
        if value is None:
            continue
        checked = _check_value(key, value)
        if checked is not None:
            result[key] = checked
    _check_total(result, "host meta")
    return result


def validate_parent_session_id(value: object) -> str:
    """A parent session id for `EnvelopeStore.create(parent_session_id=)` (the session-id rule)."""
    return validate_session_id(value)


def validate_worker_patch(patch: object) -> dict[str, MetaScalar | None]:
    """The worker keys to set (value) or unset (None); empty notes normalise to None."""
    result: dict[str, MetaScalar | None] = {}
    for key, value in _as_mapping(patch, "worker patch").items():
        if not isinstance(key, str) or key not in WORKER_META_KEYS:
            raise _reject_key(key, "worker")
        result[key] = None if value is None else _check_value(key, value)
    _check_total({k: v for k, v in result.items() if v is not None}, "worker patch")
    return result


def _is_scalar(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | int | bool)


def validate_expect(expect: object) -> dict[str, tuple[MetaScalar | None, ...]]:
    """Compare-and-set conditions: reserved key -> allowed current values (None = unset)."""
    if expect is None:
        return {}
    result: dict[str, tuple[MetaScalar | None, ...]] = {}
    for key, allowed in _as_mapping(expect, "expect").items():
        if not isinstance(key, str) or key not in RESERVED_META_KEYS:
            raise MetaValidationError(f"expect names unknown meta key {key!r}")
        if isinstance(allowed, str | bytes) or not isinstance(allowed, Collection):
            raise MetaValidationError(
                f"expect[{key!r}] must be a collection of allowed values, "
                f"got {type(allowed).__name__}"
            )
        values = tuple(allowed)
        if not values:
            raise MetaValidationError(f"expect[{key!r}] is empty: no current value could match")
        for v in values:
            if v is not None and not _is_scalar(v):
                raise MetaValidationError(
                    f"expect[{key!r}] holds {v!r}; allowed values are scalars or None"
                )
        result[key] = values
    return result


def same_scalar(a: object, b: object) -> bool:
    """Type-strict equality (True is not 1), the comparison every backend's `expect` uses."""
    return type(a) is type(b) and a == b


def read_back(key: str, value: object) -> MetaScalar | None:
    """A stored value as every read sees it: absent, unknown or poison -> None (unset)."""
    spec = KEY_SPECS.get(key)
    if spec is None or value is None:
        return None
    try:
        return spec.check(value)
    except _Invalid:
        return None


def expect_holds(
    current: Mapping[str, object], expect: Mapping[str, tuple[MetaScalar | None, ...]]
) -> bool:
    """Whether each expected key's stored value, as a read sees it (absent or poison = None),
    is among its allowed values."""
    return all(
        any(same_scalar(read_back(key, current.get(key)), allowed) for allowed in values)
        for key, values in expect.items()
    )


def turn_status(meta: Mapping[str, object]) -> TurnStatus | None:
    """The envelope's `turnStatus` (docs/envelope.md): one of `TurnStatus`, or None (unset)."""
    status = meta.get("turnStatus")
    return status if isinstance(status, str) and status in TURN_STATUSES else None  # type: ignore[return-value]  # checked against the set


def turn_run_id(meta: Mapping[str, object]) -> str | None:
    """The envelope's `turnRunId`: the latest turn's id (or the delete marker), or None."""
    run_id = meta.get("turnRunId")
    return run_id if isinstance(run_id, str) else None


def status_of_turn(meta: Mapping[str, object], op_id: str) -> TurnStatus | None:
    """The status the envelope records for turn `op_id`; None when it records another turn."""
    return turn_status(meta) if turn_run_id(meta) == op_id else None


def sanitize_meta(raw: Mapping[str, object], *, session_id: str = "?") -> dict[str, MetaScalar]:
    """Stored meta as read back: unknown keys and poison values drop to unset, never raise."""
    clean: dict[str, MetaScalar] = {}
    for key, value in raw.items():
        spec = KEY_SPECS.get(key) if isinstance(key, str) else None
        if spec is None:
            logger.warning("envelope %s: dropping unknown stored meta key %r", session_id, key)
            continue
        try:
            checked = spec.check(value)
        except _Invalid as exc:
            logger.warning("envelope %s: dropping poison meta %r (%s)", session_id, key, exc)
            continue
        if checked is not None:
            clean[key] = checked
    return clean


def describe_conflict(
    session_id: str,
    current: Mapping[str, object],
    expect: Mapping[str, tuple[MetaScalar | None, ...]],
) -> str:
    """A short conflict message: which keys were expected, what they hold (values clipped)."""

    def clip(value: object) -> str:
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."

    found = ", ".join(
        f"{k}={clip(read_back(k, current.get(k)))} not in [{', '.join(clip(v) for v in allowed)}]"
        for k, allowed in expect.items()
        if not any(same_scalar(read_back(k, current.get(k)), v) for v in allowed)
    )
    return f"session {session_id!r}: expected meta does not hold ({found or 'changed'})"
