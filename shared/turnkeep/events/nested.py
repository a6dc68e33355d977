"""A turn's events with its sub-agents' child turns merged in, nested under their calls.

The contract is docs/api.md, "Sub-agent events". A child turn lives in a session of its own,
with a sequence of its own, so the merged stream keeps one cursor per turn: the parent's seq and
each child turn's seq (`TurnCursor`, written `P` or `P:<child>=<seq>,...`). Each source is read
after its own cursor, so a page may hold any prefix of each source and nothing is lost or sent
twice. Child events are ordered after the parent's entry that made the call and before anything
later of the parent; a call whose result entry the cursor already passed is not read again (its
child ended before that result was written, and the merged order sends every child event before
the result).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Final

from turnkeep.agent.definition import Agent
from turnkeep.envelope import Envelope
from turnkeep.events.models import CURSOR_MAX, Event, EventsPage, NestedCall
from turnkeep.events.turns import TurnNotFound, turn_events
from turnkeep.harness.state import user_entry_id
from turnkeep.harness.subagents import child_ids, subagent_named
from turnkeep.storage import Storage

CHILD_KEY_PREFIX: Final = "op-sub-"
"""Every child op id starts with it; a cursor names a child by the rest (`child_ids`)."""

MIRRORED_KINDS: Final = frozenset({"approval_requested", "approval_decided"})
"""Kinds of a child turn's events that the turn above it also stores as entries of its own,
marked `subagent` (docs/approvals.md, "Inside a sub-agent"): not nested in its stream."""

CURSOR_PATTERN: Final = (
    r"^[0-9]{1,19}(:[0-9a-f]{24}=[0-9]{1,19}(,[0-9a-f]{24}=[0-9]{1,19}){0,255})?$"
)
"""A turn cursor as a query parameter or `Last-Event-ID` (docs/api.md)."""

OpenChild = Callable[[str], AbstractContextManager[tuple[Storage, Envelope | None] | None]]
"""Opens a child session for reading: its storage and envelope, None when it is not there
(or not the caller's)."""


class CursorError(ValueError):
    """A cursor that is not of the form `TurnCursor.parse` reads."""


@dataclasses.dataclass(frozen=True, slots=True)
class TurnCursor:
    """Where a reader of a turn's merged events stands: the parent's seq, each child's."""

    seq: int = 0
    children: tuple[tuple[str, int], ...] = ()

    @classmethod
    def parse(cls, text: str | int | None) -> TurnCursor:
        """`12` or `12:<24 hex>=5,...`; CursorError for anything else."""
        if text is None:
            return cls()
        if isinstance(text, int):
            return cls(seq=text)
        if not re.fullmatch(CURSOR_PATTERN, text):
            raise CursorError(
                "cursor: must be a `next_cursor` (a sequence number, then optionally "
                "':' and child=seq pairs)"
            )
        head, _, rest = text.partition(":")
        pairs = [pair.split("=") for pair in rest.split(",")] if rest else []
        values = [int(head), *(int(seq) for _, seq in pairs)]
        if any(v > CURSOR_MAX for v in values):
            raise CursorError(f"cursor: a sequence number is above {CURSOR_MAX}")
        return cls(seq=int(head), children=tuple(sorted((key, int(s)) for key, s in pairs)))

    def of_child(self, op_id: str) -> int:
        """The child turn `op_id`'s cursor (0: from its start)."""
        key = op_id.removeprefix(CHILD_KEY_PREFIX)
        return next((seq for k, seq in self.children if k == key), 0)

    def after(self, event: Event) -> TurnCursor:
        """This cursor moved past `event` (the parent's, or the child turn it is nested in)."""
        return self.moved(event.seq, event.nested[-1].op_id if event.nested else None)

    def moved(self, seq: int, op_id: str | None = None) -> TurnCursor:
        """This cursor moved to `seq` of the watched turn, or of child turn `op_id`."""
        if op_id is None:
            return dataclasses.replace(self, seq=max(self.seq, seq))
        key = op_id.removeprefix(CHILD_KEY_PREFIX)
        kept = dict(self.children)
        kept[key] = max(kept.get(key, 0), seq)
        return dataclasses.replace(self, children=tuple(sorted(kept.items())))

    def seen(self, seq: int, op_id: str | None = None) -> bool:
        """Whether an event at `seq` of that turn is at or before this cursor."""
        return seq <= (self.seq if op_id is None else self.of_child(op_id))

    def token(self) -> int | str:
        """The cursor as `next_cursor` shows it: a plain seq while no child has events."""
        if not self.children:
            return self.seq
        return f"{self.seq}:" + ",".join(f"{k}={s}" for k, s in self.children)


@dataclasses.dataclass(frozen=True, slots=True)
class _Call:
    call_id: str
    name: str
    anchor: int
    """The seq of the parent's entry that made the call."""
    result: int | None
    """The seq of its result entry, once there."""


@dataclasses.dataclass(slots=True)
class MergedPage:
    """A merged page and the child turns it looked at (which a live stream watches)."""

    page: EventsPage
    calls: list[list[NestedCall]]
    """Each child turn read, as the chain of calls it runs under (outermost first)."""


def nested_turn_events(
    storage: Storage,
    envelope: Envelope | None,
    op_id: str,
    cursor: TurnCursor,
    limit: int,
    *,
    agent: Agent,
    open_child: OpenChild,
) -> MergedPage:
    """One page of turn `op_id`'s events with its child turns' merged in (module docstring)."""
    page = turn_events(storage, envelope, op_id, cursor.seq, limit)
    if not agent.agents:
        return MergedPage(page=_with_cursor(page, cursor), calls=[])
    keyed: list[tuple[tuple[int, int, int, int], Event]] = [
        ((e.seq, 0, 0, 0), e) for e in page.events
    ]
    # A child's approval events are the parent's own entries too (marked `subagent`), so
    # the merged stream sends them once: the parent's. The cursor still passes the child's.
    hidden: set[int] = set()
    more = len(page.events) >= limit
    # A call past the end of this page's parent events waits for the page that has it.
    horizon = max([cursor.seq, *(e.seq for e in page.events)])
    calls: list[list[NestedCall]] = []
    for index, call in enumerate(_subagent_calls(storage, op_id, agent)):
        if call.result is not None and call.result <= cursor.seq:
            continue  # every event of its child came before its result, which was sent
        if call.anchor > horizon:
            continue
        sub = subagent_named(agent, call.name)
        if sub is None:  # pragma: no cover - _subagent_calls keeps only sub-agent calls
            continue
        child_session, child_op = child_ids(storage.session_id, op_id, call.call_id)
        here = NestedCall(
            call_id=call.call_id,
            agent=call.name,
            session_id=child_session,
            op_id=child_op,
            depth=1,
        )
        calls.append([here])
        child = _child_page(open_child, here, cursor, limit, sub.agent)
        if child is None:
            continue
        calls += [[here, *_deeper(chain)] for chain in child.calls]
        more = more or not child.page.finished
        for order, event in enumerate(child.page.events):
            nested = [here, *(_deeper(event.nested or []))]
            shaped = event.model_copy(update={"nested": nested})
            if event.kind in MIRRORED_KINDS:
                hidden.add(id(shaped))
            keyed.append(((call.anchor, 1, index, order), shaped))
    keyed.sort(key=lambda pair: pair[0])
    read = [event for _, event in keyed[:limit]]
    events = [event for event in read if id(event) not in hidden]
    more = more or len(keyed) > limit
    # Only the calls read here keep a place: one whose result was sent has no more events.
    live = {chain[-1].op_id.removeprefix(CHILD_KEY_PREFIX) for chain in calls}
    moved = dataclasses.replace(cursor, children=tuple(c for c in cursor.children if c[0] in live))
    for event in read:
        moved = moved.after(event)
    finished = page.finished and not more
    return MergedPage(
        page=page.model_copy(
            update={
                "events": events,
                "next_cursor": moved.token(),
                "finished": finished,
                "error_code": page.error_code if finished else None,
                "output": page.output if finished else None,
            }
        ),
        calls=calls,
    )


def _deeper(nested: list[NestedCall]) -> list[NestedCall]:
    return [n.model_copy(update={"depth": n.depth + 1}) for n in nested]


def _with_cursor(page: EventsPage, cursor: TurnCursor) -> EventsPage:
    if not cursor.children:
        return page
    moved = cursor
    for event in page.events:
        moved = moved.after(event)
    return page.model_copy(update={"next_cursor": moved.token()})


def _child_page(
    open_child: OpenChild, here: NestedCall, cursor: TurnCursor, limit: int, agent: Agent
) -> MergedPage | None:
    """The child turn's own merged page after its cursor; None before it started."""
    child_cursor = TurnCursor(seq=cursor.of_child(here.op_id), children=cursor.children)
    with open_child(here.session_id) as opened:
        if opened is None:
            return None
        storage, envelope = opened
        try:
            return nested_turn_events(
                storage,
                envelope,
                here.op_id,
                child_cursor,
                limit,
                agent=agent,
                open_child=open_child,
            )
        except TurnNotFound:
            return None


def _subagent_calls(storage: Storage, op_id: str, agent: Agent) -> list[_Call]:
    """Turn `op_id`'s calls of `agent`'s sub-agents, in the order it made them (read from
    the turn's start, not after the cursor: a call's child may still have events to send)."""
    first = storage.entry_seqs([user_entry_id(op_id)]).get(user_entry_id(op_id))
    cursor = (first - 1) if first is not None else 0
    names = {sub.name for sub in agent.agents}
    calls: dict[str, _Call] = {}
    while True:
        entries = storage.scan_entries(after_seq=cursor, limit=500)
        for entry in entries:
            data = entry.data if isinstance(entry.data, dict) else {}
            if data.get("op") != op_id:
                continue
            message = data.get("message")
            parts = message.get("parts") if isinstance(message, dict) else None
            for part in parts if isinstance(parts, list) else []:
                if not isinstance(part, dict):
                    continue
                if part.get("kind") == "tool_call" and part.get("name") in names:
                    call_id = str(part.get("id"))
                    calls[call_id] = _Call(call_id, str(part["name"]), entry.seq, None)
                elif part.get("kind") == "tool_result" and str(part.get("call_id")) in calls:
                    call_id = str(part.get("call_id"))
                    calls[call_id] = dataclasses.replace(calls[call_id], result=entry.seq)
        if len(entries) < 500:
            return list(calls.values())
        cursor = entries[-1].seq
