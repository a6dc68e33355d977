"""Stored entries and frame elements as events: transcript messages, approvals, frames."""

from __future__ import annotations

from turnkeep.events.models import Delta, Event
from turnkeep.harness.state import END_TAG, response_id
from turnkeep.harness.transcript import CONTEXT_ENTRY_TYPES
from turnkeep.storage import Entry, ListElement


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def message_event(entry: Entry) -> Event:
    """A settled transcript message (user, assistant response, tool results) as an event."""
    data = entry.data if isinstance(entry.data, dict) else {}
    message = data.get("message")
    role = message.get("role") if isinstance(message, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    round_ = data.get("round")
    op = data.get("op")
    is_response = (
        role == "assistant"
        and isinstance(op, str)
        and isinstance(round_, int)
        and entry.id == response_id(op, round_)
    )
    if entry.type in CONTEXT_ENTRY_TYPES:
        # A compaction / context_window marker: one part of that kind with its figures.
        parts = [{"kind": entry.type, **data}]
    return Event(
        seq=entry.seq,
        kind="entry",
        entry_id=entry.id,
        parent_id=entry.parent_id,
        response_id=entry.id if is_response else None,
        round=_int(round_),
        role=role if isinstance(role, str) else entry.type,
        parts=[p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else [],
        interrupted=bool(data.get("interrupted", False)),
        call_id=_str(data.get("call_id")),
        stop_reason=_str(data.get("stop_reason")),
        subagent=child if isinstance(child := data.get("subagent"), dict) else None,
    )


def approval_event(entry: Entry) -> Event:
    """An `approval_requested` / `approval_decided` entry as an event of the turn."""
    data = entry.data if isinstance(entry.data, dict) else {}
    edited = data.get("edited_arguments")
    return Event(
        seq=entry.seq,
        kind=entry.type,  # type: ignore[arg-type]
        entry_id=entry.id,
        parent_id=entry.parent_id,
        round=_int(data.get("round")),
        call_id=str(data.get("call_id")),
        tool=str(data.get("name")),
        arguments=edited if edited is not None else data.get("arguments"),
        decision=_str(data.get("decision")),
        reason=_str(data.get("reason")),
        # A child turn's request shown in its parent's turn (docs/approvals.md).
        subagent=child if isinstance(child := data.get("subagent"), dict) else None,
    )


def source_notice_event(entry: Entry) -> Event:
    """A `tool_source_unavailable` entry: the turn goes on without a tool source's tools."""
    data = entry.data if isinstance(entry.data, dict) else {}
    tools = data.get("tools")
    return Event(
        seq=entry.seq,
        kind="tool_source_unavailable",
        entry_id=entry.id,
        parent_id=entry.parent_id,
        round=_int(data.get("round")),
        source=_str(data.get("source")),
        message=_str(data.get("message")),
        tools=[str(t) for t in tools] if isinstance(tools, list) else [],
    )


def frame_event(element: ListElement, rid: str, round_: int) -> Event:
    """One stored frame element (coalesced deltas) as an event."""
    value = element.value if isinstance(element.value, dict) else {}
    deltas: list[Delta] = []
    text: list[str] = []
    raw = value.get("d")
    for delta in raw if isinstance(raw, list) else []:
        if not isinstance(delta, dict):
            continue
        kind = delta.get("k")
        if kind == "t":
            piece = str(delta.get("x", ""))
            deltas.append(Delta(type="text", text=piece))
            text.append(piece)
        elif kind == "c":
            deltas.append(
                Delta(
                    type="tool_call",
                    index=_int(delta.get("i")),
                    id=str(delta.get("id")),
                    name=str(delta.get("n")),
                )
            )
        elif kind == "a":
            deltas.append(
                Delta(type="tool_args", index=_int(delta.get("i")), text=str(delta.get("x", "")))
            )
        elif kind == "r":
            # Reasoning is its own delta type and never joins the frame's `text` (the reply).
            piece = str(delta.get("x", ""))
            if piece:
                deltas.append(Delta(type="reasoning", index=_int(delta.get("i")), text=piece))
    return Event(
        seq=element.seq,
        kind="frame",
        response_id=rid,
        round=round_,
        deltas=deltas,
        text="".join(text),
        # Every frame records it (FrameWriter); 0 only for an element written without one.
        offset=_int(value.get("o")) or 0,
        final=element.tag == END_TAG,
    )
