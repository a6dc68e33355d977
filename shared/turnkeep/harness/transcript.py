"""Transcript entries <-> provider `Message`s.

An entry of type "message" holds ``{"message": {"role", "parts"}, ...metadata}``. Building the
model's view merges consecutive messages of one role (an interrupted response followed by its
retry, or the single-result tool messages of one round) so providers that demand alternation
get it, and drops nothing: every tool call in the branch has a result entry.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from turnkeep.providers.base import (
    AttachmentPart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from turnkeep.storage import MESSAGE_ENTRY_TYPE, Entry, JsonValue, Storage, Value, value


class TranscriptDataError(ValueError):
    """A stored message entry does not have the expected shape."""


def part_to_json(part: Part) -> dict[str, JsonValue]:
    """Plain-JSON form of one message part."""
    if isinstance(part, TextPart):
        return {"kind": "text", "text": part.text}
    if isinstance(part, ToolCallPart):
        return {"kind": "tool_call", "id": part.id, "name": part.name, "arguments": part.arguments}
    if isinstance(part, ReasoningPart):
        # Kept so the next round can send signed reasoning back; never part of `Message.text`.
        return {
            "kind": "reasoning",
            "text": part.text,
            "signature": part.signature,
            "redacted": part.redacted,
        }
    if isinstance(part, AttachmentPart):
        return _attachment_to_json(part)
    data: dict[str, JsonValue] = {
        "kind": "tool_result",
        "call_id": part.call_id,
        "name": part.name,
        "content": part.content,
        "is_error": part.is_error,
    }
    if part.attachments:
        data["attachments"] = [_attachment_to_json(a) for a in part.attachments]
    return data


def _attachment_to_json(part: AttachmentPart) -> dict[str, JsonValue]:
    # A reference only: the bytes stay in the session's store (docs/attachments.md).
    return {
        "kind": "attachment",
        "attachment_id": part.attachment_id,
        "name": part.name,
        "media_type": part.media_type,
        "size": part.size,
    }


def _attachment_from_json(data: dict[str, Any]) -> AttachmentPart:
    return AttachmentPart(
        str(data["attachment_id"]),
        str(data["name"]),
        str(data["media_type"]),
        int(data.get("size", 0)),
    )


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
        if kind == "reasoning":
            return ReasoningPart(
                str(data.get("text", "")),
                str(data.get("signature", "")),
                str(data.get("redacted", "")),
            )
        if kind == "tool_result":
            return ToolResultPart(
                str(data["call_id"]),
                str(data["name"]),
                str(data["content"]),
                bool(data.get("is_error", False)),
                attachments=tuple(_attachment_from_json(a) for a in data.get("attachments", ())),
            )
        if kind == "attachment":
            return _attachment_from_json(data)
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


def usage_json(usage: Usage) -> dict[str, JsonValue]:
    """A round's usage as its entry keeps it (the turn's timeline reads it back)."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "estimated": usage.estimated,
    }


def entry_message(entry: Entry) -> Message | None:
    """The message of a message entry, or None for other entry types."""
    if entry.type != MESSAGE_ENTRY_TYPE or not isinstance(entry.data, dict):
        return None
    return message_from_json(entry.data.get("message"))


def branch_messages(storage: Storage, head: str | None) -> list[Message]:
    """Messages on the branch from the root to `head` (in order); reads every entry."""
    return TranscriptCache(max_sessions=1).branch_messages(storage, head)


COMPACTION_ENTRY_TYPE = "compaction"
WINDOW_ENTRY_TYPE = "context_window"
CONTEXT_ENTRY_TYPES = frozenset({COMPACTION_ENTRY_TYPE, WINDOW_ENTRY_TYPE})
"""Context markers: where the model's view of the branch starts (docs/harness.md)."""
CONTEXT_START_NS = "context.start"


def context_start_address() -> Value:
    """Session value naming the latest context marker and its first kept entry (bounded reads)."""
    return value(CONTEXT_START_NS)


@dataclass(frozen=True, slots=True)
class ContextMarker:
    """A `compaction` or `context_window` entry: the view starts at `first_kept_id`, after
    `summary` (a compaction's, or one a window carried forward)."""

    entry_id: str
    type: str
    first_kept_id: str
    summary: str | None


@dataclass(frozen=True, slots=True)
class ViewItem:
    """One message of the model's view with what the budget needs to know about it."""

    entry_id: str
    message: Message
    turn_start: bool
    """A turn's user message: windows cut before these only."""
    known_tokens: int | None
    """Tokens the provider reported for this message (an assistant reply), if any."""


@dataclass(frozen=True, slots=True)
class BranchView:
    """The branch from the latest context marker's first kept entry to the head."""

    items: tuple[ViewItem, ...]
    marker: ContextMarker | None
    calibration: float
    """Provider-reported / estimated input tokens of the latest reported round (1.0 if none)."""


@dataclass(frozen=True, slots=True)
class _Node:
    parent_id: str | None
    message: Message | None
    seq: int = 0
    marker: ContextMarker | None = None
    turn_start: bool = False
    known_tokens: int | None = None
    calibration: float | None = None


@dataclass
class _SessionEntries:
    last_seq: int | None = None
    nodes: dict[str, _Node] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class TranscriptCache:
    """Decoded entries of recently used sessions, read incrementally by sequence.

    Entries never change once written, so a round reads only the entries committed after the
    newest one this cache has seen (`scan_entries(after_seq=...)`). A cold read for the model's
    view (`branch_view`) starts at the latest context marker's first kept entry (named by the
    session value `context.start`), not at the root. A branch walk that misses an entry it
    needs (an entry that became visible out of sequence order, a session deleted and created
    again, a marker that is not on this branch) drops the session's cache and reads everything
    once more, so the cache can save reads but never change a transcript. One cache serves one
    storage location (it is keyed by session id); it keeps the `max_sessions` most recently
    used sessions.
    """

    def __init__(self, max_sessions: int = 8) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _SessionEntries] = OrderedDict()
        self._lock = threading.Lock()

    def branch_messages(self, storage: Storage, head: str | None) -> list[Message]:
        """Every message on the branch from the root to `head` (in order)."""
        if head is None:
            return []
        path = self._path(storage, head, bounded=False)
        return [node.message for _, node in path if node.message is not None]

    def branch_view(self, storage: Storage, head: str | None) -> BranchView:
        """The model's view: messages from the latest context marker's first kept entry (or the
        root) to `head`, reading only from there when the cache is cold."""
        if head is None:
            return BranchView((), None, 1.0)
        path = self._path(storage, head, bounded=True)
        marker = next((n.marker for _, n in reversed(path) if n.marker is not None), None)
        calibration = next((n.calibration for _, n in reversed(path) if n.calibration), 1.0)
        items = tuple(
            ViewItem(entry_id, node.message, node.turn_start, node.known_tokens)
            for entry_id, node in path
            if node.message is not None
        )
        return BranchView(items, marker, calibration)

    def _path(self, storage: Storage, head: str, *, bounded: bool) -> list[tuple[str, _Node]]:
        state = self._session(storage.session_id)
        with state.lock:
            if state.last_seq is None and bounded:
                _read_from_marker(storage, state)
            _read_new(storage, state)
            path = _walk(state.nodes, head, bounded=bounded)
            if path is None:
                state.last_seq, state.nodes = None, {}
                _read_new(storage, state)
                path = _walk(state.nodes, head, bounded=bounded)
        if path is None:
            raise TranscriptDataError(
                f"branch head {head!r} or one of its ancestors is not a stored entry"
            )
        return path

    def _session(self, session_id: str) -> _SessionEntries:
        with self._lock:
            state = self._sessions.get(session_id)
            if state is None:
                state = self._sessions[session_id] = _SessionEntries()
            self._sessions.move_to_end(session_id)
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
            return state


def _node(entry: Entry) -> _Node:
    data = entry.data if isinstance(entry.data, dict) else {}
    if entry.type in CONTEXT_ENTRY_TYPES:
        first_kept = data.get("first_kept_id")
        summary = data.get("summary")
        marker = (
            ContextMarker(
                entry.id, entry.type, first_kept, summary if isinstance(summary, str) else None
            )
            if isinstance(first_kept, str)
            else None
        )
        return _Node(entry.parent_id, None, entry.seq, marker=marker)
    message = entry_message(entry)
    known: int | None = None
    calibration: float | None = None
    context = data.get("context")
    if isinstance(context, dict):
        output = context.get("output_tokens")
        reported = context.get("input_tokens")
        estimated = context.get("estimated_input")
        if isinstance(output, int) and output > 0:
            known = output
        if isinstance(reported, int) and isinstance(estimated, int) and reported > 0 < estimated:
            calibration = reported / estimated
    turn_start = message is not None and message.role == "user" and data.get("round") == -1
    return _Node(entry.parent_id, message, entry.seq, None, turn_start, known, calibration)


def _read_new(storage: Storage, state: _SessionEntries) -> None:
    for entry in storage.scan_entries(after_seq=state.last_seq):
        state.nodes[entry.id] = _node(entry)
        if state.last_seq is None or entry.seq > state.last_seq:
            state.last_seq = entry.seq


def _read_from_marker(storage: Storage, state: _SessionEntries) -> None:
    """A cold cache reads from the latest marker's first kept entry on (when there is one)."""
    start = storage.get_value(context_start_address())
    pointer = start.value if start is not None else None
    first_kept = pointer.get("first_kept_id") if isinstance(pointer, dict) else None
    if not isinstance(first_kept, str):
        return
    # Resolved by id, not by a stored sequence: a fork copies entries under new sequences.
    found = storage.get_entries([first_kept])
    if found:
        state.last_seq = max(0, found[0].seq - 1)
        state.nodes = {}


def _walk(nodes: dict[str, _Node], head: str, *, bounded: bool) -> list[tuple[str, _Node]] | None:
    """The nodes from the start to `head`, or None if an entry on the way is unknown.

    The start is the root, or (bounded) the first kept entry of the latest marker on the way.
    """
    out: list[tuple[str, _Node]] = []
    current: str | None = head
    stop_at: str | None = None
    while current is not None:
        node = nodes.get(current)
        if node is None or len(out) > len(nodes):
            return None
        out.append((current, node))
        if current == stop_at:
            break
        if bounded and stop_at is None and node.marker is not None:
            stop_at = node.marker.first_kept_id
        current = node.parent_id
    out.reverse()
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
