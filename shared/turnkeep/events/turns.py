"""Read models of a turn from storage: its status, a page of its events, transcript pages.

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

from turnkeep.envelope import Envelope, status_of_turn
from turnkeep.events.entries import frame_event
from turnkeep.events.models import Event, EventsPage, TranscriptPage, TurnStatus, TurnView
from turnkeep.events.registry import entry_event
from turnkeep.harness.errors import StepInputError
from turnkeep.harness.state import (
    OperationState,
    TurnRecord,
    frames_address,
    load_state,
    op_address,
    response_id,
    result_address,
    user_entry_id,
    validate_op_id,
)
from turnkeep.harness.steps.common import ended_record
from turnkeep.providers.base import Usage
from turnkeep.storage import Entry, Storage, Value

_ENTRY_SCAN_PAGE = 500


class TurnNotFound(LookupError):
    """The session has no turn with that id (neither running nor finished)."""


def turn_values(op_id: str) -> list[Value]:
    """What a turn's views read first (one prefetch): its terminal record, else its running
    state; none for a string that is not a turn id (its views answer not found)."""
    try:
        validate_op_id(op_id)
    except StepInputError:
        return []
    return [result_address(op_id), op_address(op_id)]


def _record_or_state(
    storage: Storage, op_id: str
) -> tuple[tuple[TurnRecord, int] | None, OperationState | None]:
    """The turn's terminal record (with its seq), else its running state; TurnNotFound if none.

    The record is read first, then the state; a turn that ended between the two reads has no
    state any more but its record exists now, so it is read again.
    """
    found = ended_record(storage, op_id)
    if found is not None:
        return found, None
    state = load_state(storage, op_id)
    if state is not None:
        return None, state
    found = ended_record(storage, op_id)
    if found is None:
        raise TurnNotFound(op_id)
    return found, None


def _live_status(envelope: Envelope | None, op_id: str) -> TurnStatus:
    status = status_of_turn(envelope.meta, op_id) if envelope is not None else None
    if status in ("cancelling", "awaiting_approval"):
        return status
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
            error_code=record.error_code,
            rounds=record.rounds,
            usage=record.usage,
            subagent_usage=_apart(record.subagent_usage),
            output=record.output,
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
        subagent_usage=_apart(state.subagent_usage),
    )


def _apart(usage: Usage) -> Usage | None:
    return None if usage == Usage() else usage


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
    finished = found is not None and not more
    return EventsPage(
        turn_id=op_id,
        status=status,
        events=events,
        next_cursor=events[-1].seq if events else (cursor if cursor is not None else 0),
        finished=finished,
        error_code=found[0].error_code if finished and found is not None else None,
        output=found[0].output if finished and found is not None else None,
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
