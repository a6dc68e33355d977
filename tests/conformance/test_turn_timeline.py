"""Conformance: what a turn's timeline is read from holds on every backend (docs/console.md,
"Timeline"): a real turn through the harness stores `timing` and `usage` on its response and
tool-result entries, `approval` on a decided call's result and its start on the turn record,
and reading the timeline back (after a reopen) gives the same bars everywhere."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from pydantic import BaseModel

from tests.conformance.backends import BackendHarness
from turnkeep.envelope import open_envelope_store
from turnkeep.events import turn_timeline
from turnkeep.harness import HarnessDeps, HarnessLimits, resume_turn, run_turn
from turnkeep.harness.approvals import decide
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import open_storage
from turnkeep.tools.base import Tool, ToolContext, ToolResult
from turnkeep.tools.builtin import ECHO

START = 1_800_000_000.0


@dataclass
class TickingClock:
    """Each reading is one second after the previous: every interval has a known length."""

    now: float = START

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


class PostArgs(BaseModel):
    text: str


def _post(args: PostArgs, _ctx: ToolContext) -> ToolResult:
    return ToolResult(f"posted {args.text}")


POST = Tool(
    "post", "post a message", PostArgs, _post, isolation="in_process", requires_approval=True
)


def test_a_turns_timeline_reads_back_the_same_bars_on_every_backend(
    backend: BackendHarness,
) -> None:
    envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
    envelopes.create("s1", "u1")
    clock = TickingClock()
    deps = HarnessDeps(
        open_storage=lambda sid: open_storage(backend.url, sid),
        envelopes=envelopes,
        provider=ScriptedProvider(),
        tools=lambda _s, _u: [ECHO, POST],
        clock=clock,
        limits=HarnessLimits(frame_interval_ms=0, approval_timeout_seconds=600),
    )
    paused = run_turn(deps, "s1", "u1", 'call echo {"text": "a"}\ncall post {"text": "b"}')
    assert paused.status == "awaiting_approval"
    decide(deps, "s1", paused.op_id, paused.awaiting_call_ids[0], user_id="u1", decision="approve")
    result = resume_turn(deps, "s1", paused.op_id)
    assert result.status == "completed"

    storage = backend.open()
    first = turn_timeline(storage, None, result.op_id)
    again = turn_timeline(backend.reopen(storage), None, result.op_id)

    assert again == first
    kinds = [b.kind for b in first.bars]
    assert sorted(kinds) == ["approval", "round", "round", "tool", "tool"]
    assert first.untimed == 0
    assert first.started_at is not None
    assert first.finished_at is not None
    assert all(first.started_at < b.start <= b.end <= first.finished_at for b in first.bars)
    rounds = [b for b in first.bars if b.kind == "round"]
    assert [b.round for b in rounds] == [0, 1]
    assert all(b.end > b.start and (b.output_tokens or 0) > 0 for b in rounds)
    (wait,) = [b for b in first.bars if b.kind == "approval"]
    (posted,) = [b for b in first.bars if b.kind == "tool" and b.label == "post"]
    assert wait.call_id == posted.call_id == paused.awaiting_call_ids[0]
    assert wait.end <= posted.start  # the call ran after the person decided
    assert first.usage.output_tokens == sum(b.output_tokens or 0 for b in rounds)
