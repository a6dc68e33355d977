"""Transcript entries <-> provider `Message`s.

An entry of type "message" holds ``{"message": {"role", "parts"}, ...metadata}``. Building the
model's view merges consecutive messages of one role (an interrupted response followed by its
retry, or the single-result tool messages of one round) so providers that demand alternation
get it, and drops nothing: every tool call in the branch has a result entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from turnkeep.providers.base import Message, Part, TextPart, ToolCallPart, ToolResultPart
from turnkeep.storage import MESSAGE_ENTRY_TYPE, Entry, JsonValue, Storage


class TranscriptDataError(ValueError):
    """A stored message entry does not have the expected shape."""


def part_to_json(part: Part) -> dict[str, JsonValue]:
    """Plain-JSON form of one message part."""
    if isinstance(part, TextPart):
        return {"kind": "text", "text": part.text}
    if isinstance(part, ToolCallPart):
        return {"kind": "tool_call", "id": part.id, "name": part.name, "arguments": part.arguments}
    return {
        "kind": "tool_result",
        "call_id": part.call_id,
        "name": part.name,
        "content": part.content,
        "is_error": part.is_error,
    }


def part_from_json(data: Any) -> Part:
    """Inverse of part_to_json."""
    if not isinstance(data, dict):
        raise TranscriptDataError(f"message part must be an object, got {data!r}")
    kind = data.get("kind")
    try:
        if kind == "text":
            return TextPart(str(data["text"]))
        if kind == "tool_call":
            return ToolCallPart(str(data["id"]), str(data["name"]), str(data["arguments"]))
        if kind == "tool_result":
            return ToolResultPart(
                str(data["call_id"]),
                str(data["name"]),
                str(data["content"]),
                bool(data.get("is_error", False)),
            )
    except KeyError as exc:
        raise TranscriptDataError(f"message part {kind!r} lacks field {exc}") from exc
    raise TranscriptDataError(f"unknown message part kind {kind!r}")


def message_to_json(message: Message) -> dict[str, JsonValue]:
    """Plain-JSON form of a message."""
    return {"role": message.role, "parts": [part_to_json(p) for p in message.parts]}


def message_from_json(data: Any) -> Message:
    """Inverse of message_to_json."""
    if not isinstance(data, dict) or data.get("role") not in ("user", "assistant", "tool"):
        raise TranscriptDataError(f"not a stored message: {data!r}")
    parts = data.get("parts")
    if not isinstance(parts, list):
        raise TranscriptDataError("stored message has no parts list")
    return Message(data["role"], tuple(part_from_json(p) for p in parts))


def entry_data(message: Message, **meta: JsonValue) -> dict[str, JsonValue]:
    """The data of a message entry: the message plus metadata (op, round, flags)."""
    data: dict[str, JsonValue] = {"message": message_to_json(message)}
    data.update(meta)
    return data


def entry_message(entry: Entry) -> Message | None:
    """The message of a message entry, or None for other entry types."""
    if entry.type != MESSAGE_ENTRY_TYPE or not isinstance(entry.data, dict):
        return None
    return message_from_json(entry.data.get("message"))


def branch_messages(storage: Storage, head: str | None) -> list[Message]:
    """Messages on the branch from the root to `head` (in order)."""
    if head is None:
        return []
    # One scan in sequence order, then a walk up the parent links in memory: the backends'
    # scan_branch costs one read per entry.
    by_id = {entry.id: entry for entry in storage.scan_entries()}
    if head not in by_id:
        raise TranscriptDataError(f"branch head {head!r} is not a stored entry")
    path: list[Entry] = []
    current: str | None = head
    while current is not None and current in by_id and len(path) <= len(by_id):
        path.append(by_id[current])
        current = by_id[current].parent_id
    out = []
    for entry in reversed(path):
        message = entry_message(entry)
        if message is not None:
            out.append(message)
    return out


def model_view(messages: Iterable[Message]) -> tuple[Message, ...]:
    """Merge consecutive same-role messages into one (parts concatenated in order)."""
    merged: list[Message] = []
    for message in messages:
        if not message.parts:
            continue
        if merged and merged[-1].role == message.role:
            merged[-1] = Message(message.role, merged[-1].parts + message.parts)
        else:
            merged.append(message)
    return tuple(merged)


def tool_message(results: Sequence[ToolResultPart]) -> Message:
    """A `tool` message holding `results`."""
    return Message("tool", tuple(results))
