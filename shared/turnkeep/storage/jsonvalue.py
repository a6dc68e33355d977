"""JSON values as stored: validated once, stored as canonical text."""

from __future__ import annotations

import json
from typing import Any, Final, TypeAlias

from turnkeep.storage.errors import StorageValidationError

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None

# The same canonical form as dump_json, so replayed values equal committed ones; built once
# because json.dumps with options constructs an encoder per call (a third of JSONL reopen time).
dump_compact: Final = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False
).encode
"""Compact JSON text of a JSON value (the form every stored line and snapshot is written in)."""


def dump_json(value: object, *, what: str) -> str:
    """Serialize `value` to compact JSON text, or raise naming `what` was unserializable."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        text.encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise StorageValidationError(f"{what} is not a JSON value: {exc}") from exc
    except UnicodeEncodeError as exc:
        raise StorageValidationError(f"{what} holds a lone surrogate: {exc}") from exc
    return text


def load_json(text: str) -> Any:
    """Parse JSON text written by dump_json."""
    return json.loads(text)


def load_json_many(texts: list[str]) -> list[Any]:
    """Parse many texts written by dump_json, as `[load_json(t) for t in texts]` would.

    One parse of the texts joined into a JSON array: a parse call costs more than a short
    payload's own decoding, so a scan of many entries decodes in one call."""
    if len(texts) < 2:
        return [json.loads(text) for text in texts]
    return json.loads("[" + ",".join(texts) + "]")  # type: ignore[no-any-return]
