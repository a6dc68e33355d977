"""What a turn hands its live sink: text pieces at most one per interval, every commit's
events with their seqs, and causal order for watchers (a tool's result before the reply that
reads it, even when no frame is written)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tests.integration.turns_support import USER, make_turn_harness
from turnkeep.harness import HarnessLimits, run_turn
from turnkeep.harness.live import Committed, LiveDelta, LiveText


class Recording:
    """A LiveSink that keeps what it was handed, in order."""

    def __init__(self) -> None:
        self.items: list[LiveDelta | Committed] = []

    def delta(
        self, session_id: str, op_id: str, delta: LiveDelta, so_far: Callable[[], str]
    ) -> None:
        assert so_far().endswith(delta.text)
        self.items.append(delta)

    def committed(self, event: Committed) -> None:
        self.items.append(event)

    def drain(self) -> None:
        pass


def test_a_tool_result_reaches_the_sink_before_any_delta_of_the_reply_that_reads_it(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path, limits=HarnessLimits(frame_interval_ms=60_000))
    sink = Recording()
    h.deps = replace(h.deps, live=sink, clock=time.time)
    op = "op-live-1"

    result = run_turn(h.deps, h.session_id, USER, 'call echo {"text": "ping"}', op_id=op)

    assert result.status == "completed"
    result_at = next(
        i
        for i, item in enumerate(sink.items)
        if isinstance(item, Committed)
        and any(e.type == "message" and ":call" in e.id for e in item.entries)
    )
    first_reply_delta = next(
        i
        for i, item in enumerate(sink.items)
        if isinstance(item, LiveDelta) and item.response_id == f"{op}:r1"
    )
    assert result_at < first_reply_delta
    # No frame was written (one long interval), and the end came with the terminal record.
    assert not any(isinstance(i, Committed) and i.frames for i in sink.items)
    ends = [i for i in sink.items if isinstance(i, Committed) and i.record is not None]
    assert len(ends) == 1
    assert isinstance(ends[0].record, dict)
    assert ends[0].record["status"] == "completed"


def test_live_text_leaves_at_most_one_piece_per_interval_and_keeps_offsets() -> None:
    sink = Recording()
    now = [0.0]
    text = LiveText(sink, "s", "op", "op:r0", lambda: now[0], interval_s=0.1)
    for piece in ("a", "b", "c", "d", "e"):
        text.add(piece)
        now[0] += 0.04
    text.finish()

    sent = [i for i in sink.items if isinstance(i, LiveDelta)]
    # "a" at 0.00, "bcd" at 0.12 (the first piece after the interval), "e" at 0.16 held.
    assert [(d.offset, d.text) for d in sent] == [(0, "a"), (1, "bcd")]
    assert text.text() == "abcde"
