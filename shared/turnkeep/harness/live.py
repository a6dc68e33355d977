"""What a running turn tells its watchers beside storage: live text and committed events.

Two cadences (docs/harness.md, "Frames"): the model step hands the reply's text to a
`LiveSink` at a reading pace (`LiveText`, at most one piece per `live_interval_ms`), while
frames for recovery are persisted at the coarser `frame_interval_ms`. Every commit of a step's
storage handle is also handed over (`watch_commits`): the entries, frames and terminal record
it made, with their sequence numbers, so a sink pushes them without reading storage back.

Sinks: the in-process hub of `turnkeep serve` (`turnkeep.live.hub`), the WebSocket pusher on
AWS (`turnkeep.live.push`). A sink's failure never fails a step: every call is guarded here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from turnkeep.harness.state import FRAMES_NS, RESULT_NS
from turnkeep.storage import CommitResult, Entry, JsonValue, ListElement, Storage, Write
from turnkeep.storage.attached import AttachedUpdate
from turnkeep.storage.writes import AppendList, InsertEntry, SetValue

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LiveDelta:
    """A piece of the text of response `response_id` streaming now (not persisted).

    `offset`: characters (Unicode code points) of that response's text before this piece, so
    a watcher applies `bubble = bubble[:offset] + text` whatever it missed or got twice.
    """

    response_id: str
    offset: int
    text: str


@dataclass(frozen=True, slots=True)
class LiveFrame:
    """A persisted frame element of response `response_id` (model round `round`)."""

    response_id: str
    round: int
    element: ListElement


@dataclass(frozen=True, slots=True)
class Committed:
    """What one commit of a turn's session made visible: entries, frames, the end."""

    session_id: str
    op_id: str
    entries: tuple[Entry, ...] = ()
    frames: tuple[LiveFrame, ...] = ()
    record: JsonValue = None
    """The turn's terminal record (`TurnRecord` as JSON) when this commit ended it."""
    seqs: tuple[int, ...] = ()
    """Every sequence number the commit assigned (its other writes' too)."""

    @property
    def last_seq(self) -> int:
        """The highest sequence number of the commit's events (0 when it has none)."""
        seqs = [e.seq for e in self.entries] + [f.element.seq for f in self.frames]
        return max(seqs, default=0)


class LiveSink(Protocol):
    """Where a turn's live events go. Both calls are made by a step's thread."""

    def delta(
        self, session_id: str, op_id: str, delta: LiveDelta, so_far: Callable[[], str]
    ) -> None:
        """A piece of streaming text; `so_far()` is the response's whole text up to its end
        (for a watcher that joins mid-reply)."""

    def committed(self, event: Committed) -> None:
        """A commit of the turn's session made `event` visible in storage."""

    def drain(self) -> None:
        """The step is ending: hand over what is still queued (a no-op where nothing is)."""


@runtime_checkable
class EnvelopeWatch(Protocol):
    """A sink that learns who watches from the session's envelope item, which the steps read
    and update anyway (the WebSocket pusher: `turnkeep.live.marks`), so an unwatched turn
    pays no request for its watchers."""

    def seen_envelope(self, session_id: str, item: Mapping[str, Any] | None) -> None:
        """The envelope item a step read (as the store returned it; None: absent)."""

    def guard_attached(self, session_id: str, attach: AttachedUpdate) -> AttachedUpdate:
        """`attach` (the envelope update of a session commit), with the sink's condition."""

    def watched_since(self, session_id: str, item: object) -> bool:
        """A commit's envelope condition failed with `item` as it was: True when the sink's
        condition did it (a watcher came; the commit is to be tried again)."""

    def may_watch(self, session_id: str, op_id: str) -> bool:
        """False only when the sink knows nobody watches the turn (as of its last read)."""


def seen_envelope(sink: LiveSink | None, session_id: str, item: Mapping[str, Any] | None) -> None:
    """Tell an `EnvelopeWatch` sink what the step read (guarded: never fails the step)."""
    if isinstance(sink, EnvelopeWatch):
        try:
            sink.seen_envelope(session_id, item)
        except Exception:
            logger.exception("a live sink failed on the envelope of %s", session_id)


def guard_attached(
    sink: LiveSink | None, session_id: str, attach: AttachedUpdate | None
) -> AttachedUpdate | None:
    """`attach` with an `EnvelopeWatch` sink's condition (unchanged for other sinks)."""
    if attach is None or not isinstance(sink, EnvelopeWatch):
        return attach
    return sink.guard_attached(session_id, attach)


def watched_since(sink: LiveSink | None, session_id: str, item: object) -> bool:
    """Whether an `EnvelopeWatch` sink's condition failed the commit (see the protocol)."""
    return isinstance(sink, EnvelopeWatch) and sink.watched_since(session_id, item)


def may_watch(sink: LiveSink | None, session_id: str, op_id: str) -> bool:
    """Whether someone may watch the turn through `sink` (an `EnvelopeWatch` sink may know
    nobody does: then work done only for watchers is skipped)."""
    if sink is None:
        return False
    return not isinstance(sink, EnvelopeWatch) or sink.may_watch(session_id, op_id)


def drain_quietly(sink: LiveSink) -> None:
    """`sink.drain()`, logged instead of raised (a step's end never fails on its watchers)."""
    try:
        sink.drain()
    except Exception:
        logger.exception("a live sink failed to drain; the step ends anyway")


def watch_commits(storage: Storage, sink: LiveSink) -> None:
    """Hand every commit of `storage` that touches a turn's events to `sink` (guarded)."""

    def observe(writes: Sequence[Write], result: CommitResult) -> None:
        try:
            for event in committed_events(storage.session_id, writes, result):
                sink.committed(event)
        except Exception:
            logger.exception("a live sink failed on a commit of %s; the step goes on", storage)

    storage.observe(observe)


def committed_events(
    session_id: str, writes: Sequence[Write], result: CommitResult
) -> list[Committed]:
    """The turn events of one commit, one `Committed` per operation, in commit order."""
    if len(writes) != len(result.seqs):
        return []
    by_op: dict[str, _Collect] = {}
    for write, seq in zip(writes, result.seqs, strict=True):
        if isinstance(write, InsertEntry):
            data = json.loads(write.data_json)
            op = data.get("op") if isinstance(data, dict) else None
            if isinstance(op, str):
                entry = Entry(write.id, write.parent_id, write.type, data, seq)
                by_op.setdefault(op, _Collect()).entries.append(entry)
        elif isinstance(write, AppendList) and write.address.namespace == FRAMES_NS:
            rid = write.address.key
            op, _, round_text = rid.rpartition(":r")
            if op and round_text.isdigit():
                element = ListElement(seq, json.loads(write.element_json), write.tag)
                frame = LiveFrame(rid, int(round_text), element)
                by_op.setdefault(op, _Collect()).frames.append(frame)
        elif isinstance(write, SetValue) and write.address.namespace == RESULT_NS:
            by_op.setdefault(write.address.key, _Collect()).record = json.loads(write.value_json)
    return [
        Committed(session_id, op, tuple(c.entries), tuple(c.frames), c.record, result.seqs)
        for op, c in by_op.items()
    ]


@dataclass
class _Collect:
    entries: list[Entry] = field(default_factory=list)
    frames: list[LiveFrame] = field(default_factory=list)
    record: JsonValue = None


@dataclass
class LiveText:
    """Batches one response's text for a sink: at most one piece per `interval_s`.

    A piece is handed over at once when the previous one left at least `interval_s` ago,
    else it waits for the next piece after that (or `flush`, at the end of the response).
    """

    sink: LiveSink
    session_id: str
    op_id: str
    response_id: str
    clock: Callable[[], float]
    interval_s: float = 0.1
    _pieces: list[str] = field(default_factory=list)
    _sent_chars: int = 0
    _pending: list[str] = field(default_factory=list)
    _last_sent: float | None = None
    published: int = 0

    def add(self, text: str) -> None:
        """Buffer `text`; hand the buffer over when the interval has passed."""
        if not text:
            return
        self._pieces.append(text)
        self._pending.append(text)
        now = self.clock()
        if self._last_sent is None or now - self._last_sent >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        """Hand over what is buffered (no-op when nothing is)."""
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        delta = LiveDelta(self.response_id, self._sent_chars, text)
        self._sent_chars += len(text)
        self._last_sent = self.clock()
        self.published += 1
        try:
            self.sink.delta(self.session_id, self.op_id, delta, self.text)
        except Exception:
            logger.exception("a live sink failed on a delta of %s; the step goes on", self.op_id)

    def finish(self) -> None:
        """The response is complete: hand over what is buffered only if the interval has
        passed; otherwise the round's entry, committed right after, carries it."""
        if self._last_sent is None or self.clock() - self._last_sent >= self.interval_s:
            self.flush()
        else:
            self._pending.clear()

    def text(self) -> str:
        """The response's text streamed so far."""
        return "".join(self._pieces)
