"""Read models: envelope -> SessionView, turn status, turn events and transcript pages.

How frames relate to settled entries (the events contract, docs/api.md):
- every event carries the global `seq` of the write that made it; a page holds the events with
  seq > cursor in seq order, and `next_cursor` is the seq of the last one returned;
- `frame` events come only from the round that is streaming now (the operation's current round)
  and are provisional; the round's settlement commits the assistant entry `{op}:r{n}` (same
  `response_id`) after all of its frames, so it has a higher seq and supersedes them;
- frames of a round that is already settled when the page is read are never returned (the
  settlement retires their scope; one that settles between two reads of a page is checked): a
  client that polls late gets the entry only, so a settled round's text never arrives twice;
- events follow cause: seq order is the order things happened, and a tool's result entry is
  committed before the next round streams (the model step settles it first), so it precedes
  every frame and entry of the reply that reads it on every orchestrator;
- `finished` is true only when the turn had ended before the page was read and the page holds
  everything after the cursor, so polling until `finished` sees every event exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from turnkeep.api.models import (
    Delta,
    Event,
    EventsPage,
    SessionView,
    TranscriptPage,
    TurnStatus,
    TurnSummary,
    TurnView,
)
from turnkeep.envelope import Envelope
from turnkeep.harness.source_notices import TOOL_SOURCE_UNAVAILABLE
from turnkeep.harness.state import (
    END_TAG,
    OperationState,
    TurnRecord,
    frames_address,
    load_state,
    response_id,
    result_address,
    user_entry_id,
)
from turnkeep.harness.transcript import CONTEXT_ENTRY_TYPES
from turnkeep.storage import Entry, ListElement, Storage

DELETE_MARKER = "__deleting__"
"""turnRunId while a DELETE runs: blocks turn starts (never a valid operation id)."""

_ENTRY_SCAN_PAGE = 500


def session_view(envelope: Envelope) -> SessionView:
    """The owner's view of an envelope: host meta plus the latest turn summary."""
    meta = envelope.meta
    return SessionView(
        session_id=envelope.session_id,
        created_at=envelope.created_at,
        updated_at=envelope.updated_at,
        meta=envelope.host_meta(),
        turn=turn_summary(meta),
        has_working_notes=envelope.working_notes is not None,
    )


def turn_summary(meta: dict[str, Any]) -> TurnSummary:
    """The latest turn as the envelope's worker keys record it."""
    run_id = meta.get("turnRunId")
    if run_id == DELETE_MARKER:
        return TurnSummary(status="deleting")
    status = meta.get("turnStatus")
    usage: dict[str, Any] | None = None
    raw_usage = meta.get("usage")
    if isinstance(raw_usage, str):
        try:
            parsed = json.loads(raw_usage)
        except ValueError:
            parsed = None
        usage = parsed if isinstance(parsed, dict) else None
    return TurnSummary(
        turn_id=run_id if isinstance(run_id, str) else None,
        status=status if isinstance(status, str) else "idle",  # type: ignore[arg-type]
        started_at=_int(meta.get("turnStartedAt")),
        finished_at=_int(meta.get("turnFinishedAt")),
        error=meta.get("turnError") if isinstance(meta.get("turnError"), str) else None,
        step_count=_int(meta.get("turnStepCount")),
        usage=usage,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


class TurnNotFound(LookupError):
    """The session has no turn with that id (neither running nor finished)."""


def _record(storage: Storage, op_id: str) -> tuple[TurnRecord, int] | None:
    stored = storage.get_value(result_address(op_id))
    if stored is None:
        return None
    return TurnRecord.model_validate(stored.value), stored.seq


def _record_or_state(
    storage: Storage, op_id: str
) -> tuple[tuple[TurnRecord, int] | None, OperationState | None]:
    """The turn's terminal record (with its seq), else its running state; TurnNotFound if none.

    The record is read first, then the state; a turn that ended between the two reads has no
    state any more but its record exists now, so it is read again.
    """
    found = _record(storage, op_id)
    if found is not None:
        return found, None
    state = load_state(storage, op_id)
    if state is not None:
        return None, state
    found = _record(storage, op_id)
    if found is None:
        raise TurnNotFound(op_id)
    return found, None


def _live_status(envelope: Envelope | None, op_id: str) -> TurnStatus:
    meta = envelope.meta if envelope is not None else {}
    if meta.get("turnRunId") == op_id and meta.get("turnStatus") in (
        "cancelling",
        "awaiting_approval",
    ):
        return meta["turnStatus"]  # type: ignore[return-value]
    return "running"


def turn_view(storage: Storage, envelope: Envelope | None, op_id: str) -> TurnView:
    """Status of `op_id` from storage (the record, else the running operation state)."""
    found, state = _record_or_state(storage, op_id)
    if found is not None:
        record = found[0]
        return TurnView(
            turn_id=op_id,
            session_id=storage.session_id,
            status=record.status,
            finished=True,
            error=record.error,
            rounds=record.rounds,
            usage=record.usage,
        )
    if state is None:  # pragma: no cover - _record_or_state returns one of the two
        raise TurnNotFound(op_id)
    return TurnView(
        turn_id=op_id,
        session_id=storage.session_id,
        status=_live_status(envelope, op_id),
        finished=False,
        rounds=state.round,
        usage=state.usage,
    )


EntryEventBuilder = Callable[[Entry], Event]
"""Builds the event of one stored entry type (its `seq` must be the entry's)."""

_ENTRY_EVENTS: dict[str, EntryEventBuilder] = {}


def register_entry_event(entry_type: str, builder: EntryEventBuilder) -> None:
    """Show entries of `entry_type` as `builder` says (new event kinds: add the kind to
    `Event.kind` and register its entry type here); other types are shown as messages."""
    _ENTRY_EVENTS[entry_type] = builder


def entry_event(entry: Entry) -> Event:
    """A settled entry as an event: its type's registered builder, else a message event.

    Every event keeps its entry's `seq`, so the page order (seq order) stays causal whatever
    the kind (docs/api.md, "Events follow cause").
    """
    builder = _ENTRY_EVENTS.get(entry.type, message_event)
    return builder(entry)


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
        round=round_ if isinstance(round_, int) and not isinstance(round_, bool) else None,
        role=role if isinstance(role, str) else entry.type,
        parts=[p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else [],
        interrupted=bool(data.get("interrupted", False)),
        call_id=_str(data.get("call_id")),
        stop_reason=_str(data.get("stop_reason")),
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


register_entry_event(TOOL_SOURCE_UNAVAILABLE, source_notice_event)


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
    offset = value.get("o")
    return Event(
        seq=element.seq,
        kind="frame",
        response_id=rid,
        round=round_,
        deltas=deltas,
        text="".join(text),
        # Every frame records it (FrameWriter); 0 only for an element written without one.
        offset=offset if isinstance(offset, int) and not isinstance(offset, bool) else 0,
        final=element.tag == END_TAG,
    )


def _turn_entries(
    storage: Storage, op_id: str, after: int, want: int, last_seq: int | None
) -> tuple[list[Entry], bool]:
    """Entries of `op_id` after seq `after`, at most `want`; and whether more exist."""
    found: list[Entry] = []
    cursor = after
    while True:
        page = storage.scan_entries(after_seq=cursor, limit=_ENTRY_SCAN_PAGE)
        for entry in page:
            if last_seq is not None and entry.seq > last_seq:
                return found, False  # the turn's terminal commit is behind us
            data = entry.data if isinstance(entry.data, dict) else {}
            if data.get("op") == op_id:
                if len(found) == want:
                    return found, True
                found.append(entry)
        if len(page) < _ENTRY_SCAN_PAGE:
            return found, False
        cursor = page[-1].seq


def turn_events(
    storage: Storage, envelope: Envelope | None, op_id: str, cursor: int | None, limit: int
) -> EventsPage:
    """One page of the turn's events after `cursor` (see the module docstring)."""
    found, state = _record_or_state(storage, op_id)
    after = cursor if cursor is not None else 0
    user_seq = storage.entry_seqs([user_entry_id(op_id)]).get(user_entry_id(op_id))
    if user_seq is not None:
        after = max(after, user_seq - 1)  # nothing of the turn precedes its user message
    frames: list[Event] = []
    frames_more = False
    if state is not None:
        rid = response_id(op_id, state.round)
        elements = storage.read_list(frames_address(op_id, rid), cursor=after, limit=limit + 1)
        frames_more = len(elements) > limit
        frames = [frame_event(e, rid, state.round) for e in elements[:limit]]
    entries, entries_more = _turn_entries(
        storage, op_id, after, limit, found[1] if found is not None else None
    )
    if frames and storage.get_entries([response_id(op_id, state.round if state else 0)]):
        # The round settled while we read: its entry supersedes the frames we just read.
        frames, frames_more = [], False
    # A truncated source may hide events below the other source's seqs: cut at the lower end.
    if entries_more and entries:
        frames = [f for f in frames if f.seq < entries[-1].seq]
    if frames_more and frames:
        entries = [e for e in entries if e.seq < frames[-1].seq]
    events = sorted([entry_event(e) for e in entries] + frames, key=lambda ev: ev.seq)
    more = entries_more or frames_more or len(events) > limit
    events = events[:limit]
    status: TurnStatus = found[0].status if found is not None else _live_status(envelope, op_id)
    return EventsPage(
        turn_id=op_id,
        status=status,
        events=events,
        next_cursor=events[-1].seq if events else (cursor if cursor is not None else 0),
        finished=found is not None and not more,
    )


def transcript_page(storage: Storage, cursor: int | None, limit: int) -> TranscriptPage:
    """Settled entries of the session after `cursor`, in sequence order."""
    entries = storage.scan_entries(after_seq=cursor, limit=limit + 1)
    page = entries[:limit]
    return TranscriptPage(
        entries=[entry_event(e) for e in page],
        next_cursor=page[-1].seq if page else (cursor if cursor is not None else 0),
        has_more=len(entries) > limit,
    )
