"""The steps' `LiveSink` on AWS: each new event of a turn, pushed to its WebSocket subscribers.

Messages are `{"event": <kind>, "id": <seq or null>, "data": {...}}` (docs/api.md, "WebSocket
API"). Who watches is learnt from the watch mark on the session's envelope item
(`turnkeep.live.marks`), read with the step's first request: a turn nobody marked costs no
request for watchers; its envelope commits carry the mark's condition, and its other commits
(frame flushes) read the mark again (one GetItem), so a watcher that joins mid-round is found.
For a marked turn, deltas go to the subscribers known to this process (`Connections.subscribers`,
read on the turn's first delta here and again after every commit), so a delta costs one
`PostToConnection` per subscriber and no DynamoDB request. After each commit the subscribers
are read again and get the commit's events with `seq` above the cursor they subscribed with;
one that is new to this process first gets the streaming response's whole text so far (a
delta from offset 0). Posts leave from one background thread, in order (the model's stream
never waits on API Gateway), and a step waits for them when its storage handle closes. A
`GoneException` drops the subscription; any other failure is logged: a push never fails a
step. A mark found with nobody subscribed is dropped (under its generation: a subscribe meanwhile
keeps it), so a stale mark costs one Query; a turn's end drops its mark.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from turnkeep.harness.live import Committed, LiveDelta
from turnkeep.live.connections import Connections, Subscriber
from turnkeep.live.marks import Mark, unchanged_since
from turnkeep.storage.attached import AttachedUpdate

if TYPE_CHECKING:  # the event views are imported when someone watches (a step's cold start)
    from turnkeep.envelope.factory import DynamoTable
    from turnkeep.events.models import Event
    from turnkeep.live.nesting import Above, ParentOf

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES: Final = 128 * 1024
"""API Gateway's WebSocket message payload limit (`PostToConnection` answers 413 above it):
every message is sized as sent, JSON escapes included (a control character takes 6 bytes)."""


def message(kind: str, data: dict[str, Any], seq: int | None = None) -> bytes:
    """One WebSocket message."""
    return json.dumps(
        {"event": kind, "id": seq, "data": data}, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


def delta_data(delta: LiveDelta) -> dict[str, Any]:
    """A delta's `data` (the SSE stream's too)."""
    return {"response_id": delta.response_id, "offset": delta.offset, "text": delta.text}


@functools.lru_cache(maxsize=4096)
def _sent_bytes(char: str) -> int:
    """Bytes `char` takes inside a message's JSON string (escapes included)."""
    return len(json.dumps(char, ensure_ascii=False).encode("utf-8")) - 2


def delta_messages(delta: LiveDelta) -> list[bytes]:
    """`delta` as `delta` messages of at most MAX_MESSAGE_BYTES each as sent: its text cut
    where the next character would not fit, each piece at its own offset (no text lost)."""
    whole = message("delta", delta_data(delta))
    if len(whole) <= MAX_MESSAGE_BYTES:
        return [whole]
    out: list[bytes] = []
    text, start = delta.text, 0
    while start < len(text):
        at = LiveDelta(delta.response_id, delta.offset + start, "")
        budget = MAX_MESSAGE_BYTES - len(message("delta", delta_data(at)))
        end, used = start, 0
        while end < len(text) and used + _sent_bytes(text[end]) <= budget:
            used += _sent_bytes(text[end])
            end += 1
        piece = LiveDelta(delta.response_id, delta.offset + start, text[start:end])
        out.append(message("delta", delta_data(piece)))
        start = end
    return out


def event_message(event: Event) -> bytes:
    """One event as a message, or, when it is larger than a message can be, an
    `event_too_large` error naming where to read it (the events page)."""
    body = message(event.kind, event.model_dump(mode="json", exclude_none=True), event.seq)
    if len(body) <= MAX_MESSAGE_BYTES:
        return body
    return message(
        "error",
        {
            "code": "event_too_large",
            "message": f"event {event.seq} is larger than a WebSocket message: read it "
            f"from GET .../events?cursor={event.seq - 1}",
            "seq": event.seq,
        },
    )


def end_data(op_id: str, record: Any) -> dict[str, Any]:
    """The `end` event's data from the turn's terminal record (TurnRecord as JSON)."""
    found = record if isinstance(record, dict) else {}
    return {
        "turn_id": op_id,
        "status": found.get("status"),
        "error": found.get("error"),
        "error_code": found.get("error_code"),
        "rounds": found.get("rounds", 0),
        "usage": found.get("usage", {}),
        "output": found.get("output"),
    }


def end_message(op_id: str, record: Any) -> bytes:
    """The `end` message; a typed result too large for one message is left out, and the
    message says where to read it (`output_omitted`: the turn view), never a cut value."""
    data = end_data(op_id, record)
    body = message("end", data)
    if len(body) <= MAX_MESSAGE_BYTES:
        return body
    data["output"] = None
    data["output_omitted"] = f"the output is larger than a message: GET .../turns/{op_id}"
    return message("end", data)


def event_messages(event: Committed) -> list[tuple[int, bytes]]:
    """The commit's frames and entries as (seq, message), in seq order, shaped as the events
    page shows them (`turnkeep.events`, imported only when someone watches)."""
    from turnkeep.events import entry_event, frame_event

    shaped = [entry_event(entry) for entry in event.entries]
    shaped += [frame_event(f.element, f.response_id, f.round) for f in event.frames]
    return [(item.seq, event_message(item)) for item in sorted(shaped, key=lambda e: e.seq)]


@dataclass
class _Watched:
    """What this process knows of one turn's subscribers."""

    subscribers: dict[str, Subscriber] = field(default_factory=dict)
    loaded: bool = False
    streaming: dict[str, Callable[[], str]] = field(default_factory=dict)
    """The response streaming now: its text so far (for subscribers that join mid-reply)."""
    joined: set[tuple[str, str]] = field(default_factory=set)
    """(connection, response) pairs that got the response's text so far."""


@dataclass
class PushStats:
    """What the pusher did (the benchmark's figures)."""

    posts: int = 0
    refreshes: int = 0
    mark_reads: int = 0
    unmarks: int = 0
    gone: int = 0
    failures: int = 0


DRAIN_SECONDS: Final = 10.0
"""How long a step's end waits for its queued posts (then they are given up, logged)."""

GAP_MARGIN_S: Final = 0.005
"""Added to the delta spacing: a post's own start jitters by a few milliseconds."""

_Job = tuple[str, str, str, bytes, bool]
"""(session, turn, connection, message, is it a delta)."""


class _Sender:
    """Posts on one background thread, in the order submitted, so the model's stream never
    waits on API Gateway; `drain` waits for what is queued (a step's end: a Lambda container
    is frozen after the invocation returns)."""

    def __init__(self, post: Callable[[str, str, str, bytes, bool], None]) -> None:
        self._post = post
        self._queue: queue.Queue[tuple[contextvars.Context, _Job]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, job: _Job) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="turnkeep-push", daemon=True)
                self._thread.start()
        # Posted in the submitting step's context (its context variables: tracing, logging).
        self._queue.put((contextvars.copy_context(), job))

    def drain(self, timeout: float = DRAIN_SECONDS) -> bool:
        """Wait until every queued post left; False when `timeout` passed first."""
        done = self._queue.all_tasks_done
        with done:
            return done.wait_for(lambda: self._queue.unfinished_tasks == 0, timeout)

    def _run(self) -> None:
        while True:
            context, job = self._queue.get()
            try:
                context.run(self._post, *job)
            except Exception:
                logger.exception("a push failed unexpectedly")
            finally:
                self._queue.task_done()


class WebSocketPusher:
    """A `LiveSink` posting to API Gateway WebSocket connections through `management` (its
    `post_to_connection`), from a background thread (`drain` at each step's end)."""

    def __init__(
        self, connections: Connections, management: Any, *, delta_gap_s: float = 0.1
    ) -> None:
        self._connections = connections
        self._management = management
        self._delta_gap_s = delta_gap_s
        self._last_delta: dict[str, float] = {}  # connection -> when its last delta left
        self._turns: dict[tuple[str, str], _Watched] = {}
        self._gone: set[str] = set()
        self._gone_lock = threading.Lock()
        self._sender = _Sender(self._post_now)
        self._marks: dict[
            str, Mark
        ] = {}  # session -> its watch mark as last read (absent: unknown)
        self._covered: dict[
            str, frozenset[int]
        ] = {}  # session -> seqs of its last conditioned commit
        self.stats = PushStats()
        self.parents: ParentOf | None = None
        """Set where sub-agents run: a child turn's events also go to the subscribers of the
        turns above it, nested under the calls (docs/api.md, "Sub-agent events")."""
        self._above: dict[str, list[Above]] = {}  # child session -> the turns above it
        self._above_subs: dict[tuple[str, str], list[str]] = {}  # turn above -> connections
        self._above_joined: set[tuple[str, str]] = set()  # (connection, child response)

    def seen_envelope(self, session_id: str, item: Mapping[str, Any] | None) -> None:
        """Keep the watch mark of the envelope item a step read."""
        self._marks[session_id] = Mark.of(item)

    def guard_attached(self, session_id: str, attach: AttachedUpdate) -> AttachedUpdate:
        """The commit's envelope update, valid only while no subscribe came since the mark was
        read (nothing added while the mark is unknown: then every commit looks anyway)."""
        mark = self._marks.get(session_id)
        if mark is None:
            return attach
        conditioned = unchanged_since(mark, attach)

        def action(seqs: tuple[int, ...]) -> dict[str, Any]:
            self._covered[session_id] = frozenset(seqs)
            return conditioned.action(seqs)

        return AttachedUpdate(attach.table, action)

    def watched_since(self, session_id: str, item: object) -> bool:
        """True when the envelope `item` of a cancelled commit holds a newer mark (kept now)."""
        mark = self._marks.get(session_id)
        if mark is None:
            return False
        if not isinstance(item, Mapping):
            self._marks.pop(session_id, None)  # cannot tell: the retry goes unconditioned
            return False
        now = Mark.of(item)
        if now.gen == mark.gen:
            return False
        self._marks[session_id] = now
        return True

    def drain(self) -> None:
        """Wait for the queued posts (called when a step's storage handle closes)."""
        if not self._sender.drain():
            logger.warning("pushes still queued after %s s; the step ends anyway", DRAIN_SECONDS)

    def may_watch(self, session_id: str, op_id: str) -> bool:
        """False when the mark read last says nobody subscribed to the turn."""
        if self._relays(session_id):
            return True  # the turns above it may be watched
        mark = self._marks.get(session_id)
        known = self._turns.get((session_id, op_id))
        return mark is None or op_id in mark.ops or bool(known and known.subscribers)

    def delta(
        self, session_id: str, op_id: str, delta: LiveDelta, so_far: Callable[[], str]
    ) -> None:
        """Post the piece to the turn's subscribers (its whole text to one new to it)."""
        if self._relays(session_id):
            self._relay_delta(session_id, delta, so_far)
        watched = self._watched(session_id, op_id)
        if not watched.loaded:
            mark = self._marks.get(session_id)
            if mark is not None and op_id not in mark.ops:
                watched.loaded = True  # nobody marked it: the next commit looks again
            else:
                self._refresh(session_id, op_id, watched)
                self._drop_stale_mark(session_id, op_id, watched)
        self._forget_gone(watched)
        watched.streaming = {delta.response_id: so_far}
        bodies = delta_messages(delta)
        for connection in list(watched.subscribers):
            if (connection, delta.response_id) in watched.joined:
                for body in bodies:
                    self._post(session_id, op_id, connection, body, delta=True)
            else:
                self._catch_up_text(session_id, op_id, connection, delta.response_id, so_far)

    def committed(self, event: Committed) -> None:
        """Post the commit's events to the turn's subscribers, read again now (and, for a
        child turn, to the subscribers of the turns above it, nested)."""
        self._committed_here(event)
        if self._relays(event.session_id):
            self._relay_commit(event)

    def _relays(self, session_id: str) -> bool:
        return self.parents is not None and session_id.startswith("sub-")

    def _turns_above(self, session_id: str) -> list[Above]:
        if session_id not in self._above and self.parents is not None:
            from turnkeep.live.nesting import turns_above

            try:
                self._above[session_id] = turns_above(self.parents, session_id)
            except Exception:
                logger.exception("reading the parent link of %s failed", session_id)
                self.stats.failures += 1
                return []
        return self._above.get(session_id, [])

    def _relay_commit(self, event: Committed) -> None:
        """The child commit's events to each turn above it: its subscribers read again (one
        Query per turn above), each event with the calls it runs under as `nested`."""
        from turnkeep.events import entry_event, frame_event
        from turnkeep.events.nested import MIRRORED_KINDS

        # The turns above store a child's approval events as their own (docs/approvals.md).
        shaped = [
            e
            for e in (entry_event(entry) for entry in event.entries)
            if e.kind not in MIRRORED_KINDS
        ]
        shaped += [frame_event(f.element, f.response_id, f.round) for f in event.frames]
        shaped.sort(key=lambda e: e.seq)
        for above in self._turns_above(event.session_id):
            key = (above.session_id, above.op_id)
            watched = _Watched()
            self._refresh(above.session_id, above.op_id, watched)
            self._forget_gone(watched)
            self._above_subs[key] = list(watched.subscribers)
            nested = list(above.nested)
            for connection in self._above_subs[key]:
                for item in shaped:
                    body = event_message(item.model_copy(update={"nested": nested}))
                    self._post(above.session_id, above.op_id, connection, body)

    def _relay_delta(self, session_id: str, delta: LiveDelta, so_far: Callable[[], str]) -> None:
        """A child's live text to the subscribers of the turns above it known since its last
        commit (no request); one new to the response gets its text so far first."""
        for above in self._turns_above(session_id):
            nested = [call.model_dump(mode="json") for call in above.nested]
            for connection in self._above_subs.get((above.session_id, above.op_id), []):
                joined = (connection, delta.response_id)
                piece = delta if joined in self._above_joined else None
                if piece is None:
                    self._above_joined.add(joined)
                    piece = LiveDelta(delta.response_id, 0, so_far())
                for body in delta_messages(piece):
                    data = json.loads(body)["data"]
                    self._post(
                        above.session_id,
                        above.op_id,
                        connection,
                        message("delta", {**data, "nested": nested}),
                        delta=True,
                    )

    def _committed_here(self, event: Committed) -> None:
        """The commit's events to the turn's own subscribers."""
        session_id, op_id = event.session_id, event.op_id
        watched = self._watched(session_id, op_id)
        if self._should_look(event, watched):
            self._refresh(session_id, op_id, watched)
            self._drop_stale_mark(session_id, op_id, watched)
        self._forget_gone(watched)
        if not watched.subscribers:
            if event.record is not None:
                self._turns.pop((session_id, op_id), None)
                self._end_mark(session_id, op_id)
            return
        settled = {e.id for e in event.entries}
        for rid, so_far in list(watched.streaming.items()):
            if rid in settled:
                del watched.streaming[rid]
                continue
            for connection in list(watched.subscribers):
                if (connection, rid) not in watched.joined:
                    self._catch_up_text(session_id, op_id, connection, rid, so_far)
        messages = event_messages(event)
        for connection, subscriber in list(watched.subscribers.items()):
            for seq, body in messages:
                if seq > subscriber.after and connection in watched.subscribers:
                    self._post(session_id, op_id, connection, body)
        if event.record is not None:
            end = end_message(op_id, event.record)
            for connection in list(watched.subscribers):
                self._post(session_id, op_id, connection, end)
            self._turns.pop((session_id, op_id), None)
            self._end_mark(session_id, op_id)

    def _should_look(self, event: Committed, watched: _Watched) -> bool:
        """Whether to read the turn's subscribers after this commit (see the module doc)."""
        session_id, op_id = event.session_id, event.op_id
        mark = self._marks.get(session_id)
        if watched.subscribers or mark is None or op_id in mark.ops:
            return True
        if event.seqs and set(event.seqs) <= self._covered.get(session_id, frozenset()):
            return False  # its envelope update proved no subscribe came since the mark's read
        try:
            fresh = self._connections.read_mark(session_id)
        except Exception:
            logger.exception("reading the watch mark of %s failed; looking for subscribers", op_id)
            self.stats.failures += 1
            self._marks.pop(session_id, None)
            return True
        self.stats.mark_reads += 1
        self._marks[session_id] = fresh
        return op_id in fresh.ops

    def _drop_stale_mark(self, session_id: str, op_id: str, watched: _Watched) -> None:
        """A marked turn with nobody subscribed: drop the mark unless a subscribe came since."""
        mark = self._marks.get(session_id)
        if watched.subscribers or not watched.loaded or mark is None or op_id not in mark.ops:
            return
        try:
            dropped = self._connections.unmark(session_id, op_id, gen=mark.gen)
        except Exception:
            logger.exception("dropping the watch mark of %s failed", op_id)
            self.stats.failures += 1
            return
        self.stats.unmarks += 1
        if dropped:
            self._marks[session_id] = Mark(mark.gen, mark.ops - {op_id})
        else:
            self._marks.pop(session_id, None)  # a subscribe came: read it again at need

    def _end_mark(self, session_id: str, op_id: str) -> None:
        """The turn ended: its mark is of no more use (no step of it reads it again)."""
        mark = self._marks.get(session_id)
        if mark is None or op_id not in mark.ops:
            return
        try:
            self._connections.unmark(session_id, op_id)
        except Exception:
            logger.exception("dropping the watch mark of ended turn %s failed", op_id)
            self.stats.failures += 1
            return
        self.stats.unmarks += 1
        self._marks[session_id] = Mark(mark.gen, mark.ops - {op_id})

    def _watched(self, session_id: str, op_id: str) -> _Watched:
        return self._turns.setdefault((session_id, op_id), _Watched())

    def _refresh(self, session_id: str, op_id: str, watched: _Watched) -> None:
        try:
            found = self._connections.subscribers(session_id, op_id)
        except Exception:
            logger.exception("reading the subscribers of %s failed; pushing to known ones", op_id)
            self.stats.failures += 1
            return
        self.stats.refreshes += 1
        watched.subscribers = {s.connection_id: s for s in found}
        watched.loaded = True

    def _catch_up_text(
        self,
        session_id: str,
        op_id: str,
        connection: str,
        response_id: str,
        so_far: Callable[[], str],
    ) -> None:
        self._connections_joined(session_id, op_id).add((connection, response_id))
        for body in delta_messages(LiveDelta(response_id, 0, so_far())):
            self._post(session_id, op_id, connection, body, delta=True)

    def _connections_joined(self, session_id: str, op_id: str) -> set[tuple[str, str]]:
        return self._watched(session_id, op_id).joined

    def _forget_gone(self, watched: _Watched) -> None:
        with self._gone_lock:
            gone = set(self._gone)
        for connection in gone:
            watched.subscribers.pop(connection, None)

    def _post(
        self, session_id: str, op_id: str, connection: str, body: bytes, *, delta: bool = False
    ) -> None:
        self._sender.submit((session_id, op_id, connection, body, delta))

    def _post_now(
        self, session_id: str, op_id: str, connection: str, body: bytes, delta: bool
    ) -> None:
        with self._gone_lock:
            if connection in self._gone:
                return
        if delta:
            # The step hands pieces over at most once per interval; a backlog behind a slow
            # post must not bunch them: a connection gets at most one delta per interval.
            gap = self._delta_gap_s + GAP_MARGIN_S
            wait = self._last_delta.get(connection, 0.0) + gap - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._last_delta[connection] = time.monotonic()
        try:
            self._management.post_to_connection(ConnectionId=connection, Data=body)
            self.stats.posts += 1
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code == "GoneException":
                self.stats.gone += 1
                with self._gone_lock:
                    self._gone.add(connection)
                try:
                    self._connections.unsubscribe(session_id, op_id, connection)
                except Exception:
                    logger.exception("dropping gone connection %s failed", connection)
                return
            self.stats.failures += 1
            logger.warning("push to connection %s failed: %s", connection, exc)


class LazyClient:
    """An AWS client built on first use (a step that pushes nothing never builds one)."""

    def __init__(self, service: str, endpoint: str = "", region: str = "") -> None:
        self._service, self._endpoint, self._region = service, endpoint, region
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            from turnkeep.plumbing.clients import shared_client

            self._client = shared_client(self._service, self._region, self._endpoint)
        return getattr(self._client, name)


def envelope_table(envelope_url: str) -> DynamoTable:
    """The DynamoDB table (name, region, endpoint) of an `aws://?table=...` envelope URL, read
    by the envelope's own parser; ValueError naming the setting otherwise."""
    from turnkeep.envelope.errors import MetaValidationError
    from turnkeep.envelope.factory import dynamo_table_of

    try:
        return dynamo_table_of(envelope_url)
    except MetaValidationError:
        raise ValueError(
            f"TURNKEEP_WS_ENDPOINT needs TURNKEEP_ENVELOPE_URL of the form aws://?table=<table>, "
            f"got {envelope_url!r}"
        ) from None


def table_of(envelope_url: str) -> str:
    """The DynamoDB table name of an `aws://?table=...` envelope URL; ValueError otherwise."""
    return envelope_table(envelope_url).table


def table_client(table: DynamoTable) -> LazyClient:
    """A DynamoDB client for the envelope table's own region and endpoint, built on first use."""
    return LazyClient("dynamodb", table.endpoint, table.region)


def websocket_pusher(
    endpoint: str, envelope_url: str, *, delta_gap_s: float = 0.1
) -> WebSocketPusher:
    """The pusher of a Lambda container: subscriptions in the envelope table, posts through
    the WebSocket API's management endpoint (clients built on first use)."""
    table = envelope_table(envelope_url)
    connections = Connections(table_client(table), table.table)
    management = LazyClient("apigatewaymanagementapi", endpoint)
    return WebSocketPusher(connections, management, delta_gap_s=delta_gap_s)
