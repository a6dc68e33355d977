"""Reading a Server-Sent Events stream (the turn stream of docs/api.md) line by line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One event: its `event:` name, `id:` (None without one; a string when it also holds
    sub-agents' child turns' places, docs/api.md) and `data:` parsed as JSON."""

    kind: str
    id: int | str | None
    data: Any


def read_sse(lines: Iterable[str]) -> Iterator[SseEvent]:
    """The events of a stream given as lines (comments such as `: ping` are skipped)."""
    kind: str = "message"
    event_id: int | str | None = None
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if line == "":
            if data:
                yield SseEvent(kind, event_id, json.loads("\n".join(data)))
            kind, event_id, data = "message", None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            kind = value
        elif name == "id":
            event_id = int(value) if value.isascii() and value.isdigit() else (value or None)
        elif name == "data":
            data.append(value)


def apply_delta(bubble: str, offset: int, text: str) -> str:
    """The stream's one rule for frames and deltas: `bubble[:offset] + text` (idempotent)."""
    return bubble[:offset] + text
