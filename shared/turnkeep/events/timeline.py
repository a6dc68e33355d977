"""A turn's timeline from what the turn stores (docs/console.md, "Timeline"): its model rounds,
tool calls, approval waits and context shrinks as bars on a time axis, with their tokens.

No tracing backend is needed: the harness keeps `timing` (and `usage`) on the response, tool
result and marker entries, `approval` on the result of a call a person decided, and the turn's
start and end on its record. Entries written before those fields existed have no bar; they are
counted in `untimed`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from turnkeep.envelope import Envelope
from turnkeep.events.models import TurnStatus
from turnkeep.events.turns import _live_status, _record_or_state, _turn_entries
from turnkeep.harness.state import user_entry_id
from turnkeep.harness.transcript import CONTEXT_ENTRY_TYPES, entry_message
from turnkeep.providers.base import ToolResultPart, Usage
from turnkeep.storage import Entry, JsonValue, Storage

BarKind = Literal["round", "tool", "approval", "compaction", "context_window"]
_ALL = 1_000_000
"""Entries of one turn read for its timeline: bounded by the turn's caps long before this."""


class TimelineBar(BaseModel):
    """One interval of the turn (epoch seconds) and what it used."""

    kind: BarKind
    label: str
    start: float
    end: float
    round: int | None = None
    call_id: str | None = None
    is_error: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    estimated: bool = False
    """The server reported no usage: the tokens are the provider's estimate."""
    # Unfinished (issue #33 item 5): the round's cost in micro-dollars joins here as
    # `cost_micros` once pricing (item 1) lands; the console already shows it when present.


class TurnTimeline(BaseModel):
    """The bars of one turn in start order, between its start and (once ended) its end."""

    turn_id: str
    session_id: str
    status: TurnStatus
    started_at: float | None = Field(description="epoch seconds; None for a turn recorded before")
    finished_at: float | None = None
    bars: list[TimelineBar]
    untimed: int = Field(description="rounds and calls stored without timing (older turns)")
    usage: Usage


def _number(value: JsonValue | None) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: JsonValue | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: JsonValue | None) -> str | None:
    return value if isinstance(value, str) else None


def _interval(data: dict[str, JsonValue], key: str = "timing") -> tuple[float, float] | None:
    timing = data.get(key)
    if not isinstance(timing, dict):
        return None
    start = _number(timing.get("started_at"))
    end = _number(timing.get("ended_at"))
    if start is None:
        return None
    return start, end if end is not None and end >= start else start


def _with_usage(bar: TimelineBar, data: dict[str, JsonValue]) -> TimelineBar:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return bar
    figures = {
        key: int(value)
        for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
        if isinstance(value := usage.get(key), int) and not isinstance(value, bool)
    }
    return bar.model_copy(update={**figures, "estimated": usage.get("estimated") is True})


def _round_bar(entry: Entry, data: dict[str, JsonValue]) -> TimelineBar | None:
    interval = _interval(data)
    if interval is None:
        return None
    number, model = _int(data.get("round")), _str(data.get("model"))
    label = f"round {number}" + (f" · {model}" if model else "")
    bar = TimelineBar(kind="round", label=label, start=interval[0], end=interval[1], round=number)
    return _with_usage(bar, data)


def _tool_bars(entry: Entry, data: dict[str, JsonValue]) -> tuple[list[TimelineBar], bool]:
    """A call's approval wait and run; whether the call had a timing to show."""
    message = entry_message(entry)
    part = next(
        (p for p in (message.parts if message else ()) if isinstance(p, ToolResultPart)), None
    )
    name = part.name if part is not None else "tool"
    call_id, round_ = _str(data.get("call_id")), _int(data.get("round"))
    bars: list[TimelineBar] = []
    approval = data.get("approval")
    if isinstance(approval, dict):
        start = _number(approval.get("requested_at"))
        end = _number(approval.get("decided_at"))
        if start is not None:
            decision = approval.get("decision")
            bars.append(
                TimelineBar(
                    kind="approval",
                    label=name + (f" · {decision}" if decision else ""),
                    start=start,
                    end=end if end is not None and end >= start else start,
                    round=round_,
                    call_id=call_id,
                    is_error=decision in ("deny", "timeout"),
                )
            )
    interval = _interval(data)
    if interval is not None:
        bars.append(
            TimelineBar(
                kind="tool",
                label=name,
                start=interval[0],
                end=interval[1],
                round=round_,
                call_id=call_id,
                is_error=bool(part.is_error) if part is not None else False,
            )
        )
    return bars, interval is not None


def _marker_bar(entry: Entry, data: dict[str, JsonValue]) -> TimelineBar | None:
    interval = _interval(data)
    if interval is None:
        return None
    kind: BarKind = "compaction" if entry.type == "compaction" else "context_window"
    before, after = data.get("tokens_before"), data.get("tokens_after")
    bar = TimelineBar(
        kind=kind,
        label=f"{'compaction' if kind == 'compaction' else 'window'} · {before} → {after} tokens",
        start=interval[0],
        end=interval[1],
        round=_int(data.get("round")),
    )
    return _with_usage(bar, data) if kind == "compaction" else bar


def entry_bars(entry: Entry) -> tuple[list[TimelineBar], int]:
    """The bars of one stored entry of a turn, and 1 when it is a round or call kept untimed."""
    data = entry.data if isinstance(entry.data, dict) else {}
    if entry.type in CONTEXT_ENTRY_TYPES:
        bar = _marker_bar(entry, data)
        return ([bar] if bar else []), 0
    message = data.get("message")
    role = message.get("role") if isinstance(message, dict) else None
    if role == "assistant" and not data.get("interrupted"):
        bar = _round_bar(entry, data)
        return ([bar], 0) if bar else ([], 1)
    if role == "tool":
        bars, timed = _tool_bars(entry, data)
        return bars, 0 if timed or data.get("interrupted") else 1
    return [], 0


def turn_timeline(storage: Storage, envelope: Envelope | None, op_id: str) -> TurnTimeline:
    """The timeline of `op_id` (running or ended); TurnNotFound when the session has none."""
    found, state = _record_or_state(storage, op_id)
    # Nothing of the turn precedes its user message: the scan starts there, not at the
    # session's first entry.
    user_seq = storage.entry_seqs([user_entry_id(op_id)]).get(user_entry_id(op_id))
    after = max(0, user_seq - 1) if user_seq is not None else 0
    entries, _ = _turn_entries(storage, op_id, after, _ALL, found[1] if found is not None else None)
    bars: list[TimelineBar] = []
    untimed = 0
    for entry in entries:
        got, missing = entry_bars(entry)
        bars.extend(got)
        untimed += missing
    bars.sort(key=lambda b: (b.start, b.end))
    if found is not None:
        record = found[0]
        return TurnTimeline(
            turn_id=op_id,
            session_id=storage.session_id,
            status=record.status,
            started_at=record.started_at,
            finished_at=record.finished_at,
            bars=bars,
            untimed=untimed,
            usage=record.usage,
        )
    assert state is not None  # _record_or_state returns one of the two
    return TurnTimeline(
        turn_id=op_id,
        session_id=storage.session_id,
        status=_live_status(envelope, op_id),
        started_at=state.started_at,
        bars=bars,
        untimed=untimed,
        usage=state.usage,
    )
