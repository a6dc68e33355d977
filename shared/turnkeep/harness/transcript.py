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
    """Messages on the branch from the root to `head` (in order); reads every entry."""
    return TranscriptCache(max_sessions=1).branch_messages(storage, head)


@dataclass(frozen=True, slots=True)
class _Node:
    parent_id: str | None
    message: Message | None


@dataclass
class _SessionEntries:
    last_seq: int | None = None
    nodes: dict[str, _Node] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class TranscriptCache:
    """Decoded entries of recently used sessions, read incrementally by sequence.

    Every model round needs the whole branch. Entries never change once written, so a round
    reads only the entries committed after the newest one this cache has seen
    (`scan_entries(after_seq=...)`) instead of the whole session. A branch walk that misses an
    ancestor (an entry that became visible out of sequence order, a session deleted and created
    again) drops the session's cache and reads everything once more, so the cache can save
    reads but never change a transcript. One cache serves one storage location (it is keyed by
    session id); it keeps the `max_sessions` most recently used sessions.
    """

    def __init__(self, max_sessions: int = 8) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _SessionEntries] = OrderedDict()
        self._lock = threading.Lock()

    def branch_messages(self, storage: Storage, head: str | None) -> list[Message]:
        """Messages on the branch from the root to `head` (in order)."""
        if head is None:
            return []
        state = self._session(storage.session_id)
        with state.lock:
            _read_new(storage, state)
            path = _walk(state.nodes, head)
            if path is None:
                state.last_seq, state.nodes = None, {}
                _read_new(storage, state)
                path = _walk(state.nodes, head)
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


def _read_new(storage: Storage, state: _SessionEntries) -> None:
    for entry in storage.scan_entries(after_seq=state.last_seq):
        state.nodes[entry.id] = _Node(entry.parent_id, entry_message(entry))
        if state.last_seq is None or entry.seq > state.last_seq:
            state.last_seq = entry.seq


def _walk(nodes: dict[str, _Node], head: str) -> list[Message] | None:
    """The messages from the root to `head`, or None if an entry on the way is unknown."""
    out: list[Message] = []
    current: str | None = head
    steps = 0
    while current is not None:
        node = nodes.get(current)
        if node is None or steps > len(nodes):
            return None
        if node.message is not None:
            out.append(node.message)
        current = node.parent_id
        steps += 1
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
