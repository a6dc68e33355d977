"""Progress in the operation scope: coalesced assistant frames, tool checkpoints and memos.

Every progress write is fenced: it commits with the operation state (`turn.op`) as the
storage guard, so the storage applies it only while the operation runs — the check and the write
are one atomic step on every backend. Once the terminal commit removed the operation state, a
late write is refused (FencedWriteError) and never recreates the retired scope.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from turnkeep.harness.errors import FencedWriteError
from turnkeep.harness.state import (
    END_TAG,
    checkpoint_address,
    frames_address,
    memo_address,
    op_address,
)
from turnkeep.providers.base import (
    Message,
    ModelResponse,
    Part,
    StopReason,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolCallStart,
    Usage,
)
from turnkeep.storage import (
    CommitResult,
    GuardFailedError,
    JsonValue,
    Storage,
    Value,
    Write,
    append_list,
    delete_value,
    set_value,
)


def fenced_commit(storage: Storage, op_id: str, writes: list[Write]) -> CommitResult:
    """Commit `writes` only while `op_id` runs (atomically guarded by its operation state).

    Used for progress in the operation scope and for every session commit of a running turn
    (call states, round settlements, the terminal commit), so a step that lost a race with the
    terminal commit writes nothing.
    """
    try:
        return storage.commit(writes, guard=op_address(op_id))
    except GuardFailedError as exc:
        raise FencedWriteError(
            f"operation {op_id!r} of session {storage.session_id!r} has ended; "
            "its progress write was rejected"
        ) from exc


logger = logging.getLogger(__name__)


@dataclass
class FrameStats:
    """What a frame writer did (for tests and the benchmark)."""

    commits: int = 0
    deltas: int = 0
    bytes: int = 0


@dataclass
class FrameWriter:
    """Coalesces stream events into one list append per interval or size; final flush tagged.

    Deltas are buffered; a flush happens when `interval_s` passed since the last flush or the
    buffer holds `max_bytes` of text. `finish` writes the last element tagged `end` together
    with the stop reason and usage, so recovery can rebuild a whole response from frames —
    but only after an earlier frame: a reply that streamed within the first interval reached
    watchers only as live deltas (`turnkeep.harness.live`), and its round settlement records it
    directly (a crash before that settlement asks the model again; docs/harness.md, "Frames").
    Each element records `o`, the characters of the response's text before its own.

    `prelude`: session writes that must get lower sequences than any frame (the previous
    round's tool results: events follow cause). They commit, fenced, right before the first
    frame; until then `uncommitted_prelude()` hands them to the round settlement instead.
    """

    storage: Storage
    op_id: str
    response_id: str
    clock: Callable[[], float]
    interval_s: float = 0.05
    max_bytes: int = 2048
    stats: FrameStats = field(default_factory=FrameStats)
    prelude: list[Write] = field(default_factory=list)
    _buffer: list[dict[str, JsonValue]] = field(default_factory=list)
    _buffered_bytes: int = 0
    _chars_written: int = 0
    """Characters of response text in committed elements (the next element's offset `o`)."""
    _buffered_chars: int = 0
    _last_flush: float | None = None
    _closed: bool = False

    def add(self, event: StreamEvent) -> None:
        """Buffer one stream event (ResponseDone is handled by `finish`)."""
        if self._closed:
            raise FencedWriteError(f"frame writer of {self.response_id!r} is closed")
        if self._last_flush is None:
            self._last_flush = self.clock()
        size = _append_delta(self._buffer, event)
        self._buffered_bytes += size
        if isinstance(event, TextDelta):
            self._buffered_chars += len(event.text)
        self.stats.deltas += 1
        if (
            self._buffered_bytes >= self.max_bytes
            or self.clock() - self._last_flush >= self.interval_s
        ):
            self.flush()

    def flush(self, *, tag: str | None = None, end: dict[str, JsonValue] | None = None) -> None:
        """Append the buffered deltas as one element (no-op when empty and untagged)."""
        if self._closed:
            raise FencedWriteError(f"frame writer of {self.response_id!r} is closed")
        if not self._buffer and tag is None:
            return
        # `o`: characters of the response's text before this element's (the events' offset).
        element: dict[str, JsonValue] = {"d": list(self._buffer), "o": self._chars_written}
        if end is not None:
            element["end"] = end
        try:
            self._commit_prelude()
            fenced_commit(
                self.storage,
                self.op_id,
                [append_list(frames_address(self.op_id, self.response_id), element, tag)],
            )
        except FencedWriteError:
            self._closed = True
            raise
        self.stats.commits += 1
        self.stats.bytes += self._buffered_bytes
        self._buffer.clear()
        self._buffered_bytes = 0
        self._chars_written += self._buffered_chars
        self._buffered_chars = 0
        self._last_flush = self.clock()

    def commit_prelude(self) -> None:
        """Commit the prelude now (before live text leaves: events follow cause for watchers
        too, so a tool's result is stored before any piece of the reply that reads it)."""
        try:
            self._commit_prelude()
        except FencedWriteError:
            self._closed = True
            raise

    def _commit_prelude(self) -> None:
        if self.prelude:
            fenced_commit(self.storage, self.op_id, self.prelude)
            self.prelude = []

    @property
    def wrote_frames(self) -> bool:
        """True once a frame committed: the round's scope then needs retiring at settlement."""
        return self.stats.commits > 0

    def uncommitted_prelude(self) -> list[Write]:
        """The prelude writes no frame has committed yet (the settlement commits them)."""
        return list(self.prelude)

    def finish(self, response: ModelResponse, *, wrap_up: bool = False) -> None:
        """Write the final, `end`-tagged element (if any frame preceded it) and close."""
        if self.stats.commits == 0:
            self._closed = True
            return
        usage = response.usage
        self.flush(
            tag=END_TAG,
            end={
                "wrap_up": wrap_up,
                "stop": response.stop_reason,
                "model": response.model,
                "usage": [
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                ],
            },
        )
        self._closed = True

    def close(self) -> None:
        """Refuse every later write (the step is over)."""
        self._closed = True


def _append_delta(buffer: list[dict[str, JsonValue]], event: StreamEvent) -> int:
    """Merge `event` into `buffer` (consecutive text / argument pieces coalesce); its size."""
    last = buffer[-1] if buffer else None
    if isinstance(event, TextDelta):
        if last is not None and last.get("k") == "t":
            last["x"] = str(last["x"]) + event.text
        else:
            buffer.append({"k": "t", "x": event.text})
        return len(event.text.encode("utf-8"))
    if isinstance(event, ToolCallStart):
        buffer.append({"k": "c", "i": event.index, "id": event.id, "n": event.name})
        return len(event.id) + len(event.name) + 16
    if isinstance(event, ToolCallDelta):
        if last is not None and last.get("k") == "a" and last.get("i") == event.index:
            last["x"] = str(last["x"]) + event.arguments
        else:
            buffer.append({"k": "a", "i": event.index, "x": event.arguments})
        return len(event.arguments.encode("utf-8"))
    return 0


@dataclass(frozen=True, slots=True)
class ReplayedFrames:
    """A response rebuilt from stored frames; `response` is set only if the `end` frame exists."""

    message: Message
    response: ModelResponse | None
    element_count: int
    wrap_up: bool = False


class _Delta(BaseModel):
    """One coalesced stream piece as `_append_delta` stores it: text (`t`), a tool call's
    start (`c`: index, id, name) or a piece of its arguments (`a`)."""

    # Built on first use: a step that replays no frame never pays for them (docs/step-functions.md).
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    k: Literal["t", "c", "a"]
    x: str = ""
    i: int = 0
    id: str = ""
    n: str = ""


class _End(BaseModel):
    """What `FrameWriter.finish` stores on the `end` element."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    wrap_up: bool = False
    stop: StopReason = "end_turn"
    model: str | None = ""
    usage: list[int] = Field(default_factory=list)


class _Element(BaseModel):
    """One stored frame: its deltas and, on the last one, the end of the response."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    d: list[_Delta] = Field(default_factory=list)
    o: int = 0
    end: _End | None = None


def read_frames(storage: Storage, op_id: str, response_id: str) -> ReplayedFrames | None:
    """Rebuild the (possibly partial) response of a round from its frames; None if no frames.

    An element that does not read back as a frame (an unknown stop reason, a malformed delta)
    ends the replay there: what came before is kept as a partial, interrupted response.
    """
    address = frames_address(op_id, response_id)
    stored = []
    cursor: int | None = None
    while True:
        page = storage.read_list(address, cursor=cursor, stop_at_tag=END_TAG)
        stored.extend(page)
        if not page or page[-1].tag == END_TAG:
            break
        cursor = page[-1].seq
    if not stored:
        return None
    text: list[str] = []
    calls: dict[int, tuple[str, str, list[str]]] = {}
    order: list[int] = []
    end: _End | None = None
    for item in stored:
        try:
            element = _Element.model_validate(item.value)
        except ValidationError:
            logger.warning(
                "frame %s of %s does not read back; replay stops there", item.seq, response_id
            )
            break
        for delta in element.d:
            if delta.k == "t":
                text.append(delta.x)
            elif delta.k == "c":
                calls[delta.i] = (delta.id, delta.n, [])
                order.append(delta.i)
            elif delta.i in calls:
                calls[delta.i][2].append(delta.x)
        if item.tag == END_TAG:
            end = element.end
    parts: list[Part] = []
    if text and "".join(text):
        parts.append(TextPart("".join(text)))
    if end is not None:
        # Tool calls are kept only from a complete stream: a partial call's arguments are cut.
        parts.extend(ToolCallPart(calls[i][0], calls[i][1], "".join(calls[i][2])) for i in order)
    message = Message("assistant", tuple(parts))
    if end is None:
        return ReplayedFrames(message, None, len(stored))
    numbers = [*end.usage, 0, 0, 0, 0][:4]
    response = ModelResponse(message, end.stop, Usage(*numbers), end.model or "")
    return ReplayedFrames(message, response, len(stored), end.wrap_up)


@dataclass
class ToolProgress:
    """Checkpoint and memo of one tool call, in the operation scope; every write is fenced."""

    storage: Storage
    op_id: str
    call_id: str

    def checkpoint(self) -> JsonValue:
        """The last checkpoint of this call (None if none), e.g. after a replay."""
        stored = self.storage.get_value(checkpoint_address(self.op_id, self.call_id))
        return None if stored is None else stored.value

    def save_checkpoint(self, snapshot: JsonValue) -> None:
        """Replace the checkpoint with `snapshot` (rejected once the operation ended)."""
        self._write(checkpoint_address(self.op_id, self.call_id), snapshot)

    def memo(self) -> JsonValue:
        """The memo of this call (None if none)."""
        stored = self.storage.get_value(memo_address(self.op_id, self.call_id))
        return None if stored is None else stored.value

    def save_memo(self, memo: JsonValue) -> None:
        """Replace the memo (rejected once the operation ended)."""
        self._write(memo_address(self.op_id, self.call_id), memo)

    def _write(self, address: Value, data: JsonValue) -> None:
        write: Write = delete_value(address) if data is None else set_value(address, data)
        fenced_commit(self.storage, self.op_id, [write])
