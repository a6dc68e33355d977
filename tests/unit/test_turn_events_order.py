"""Turn events follow cause: a tool's result is visible before the frames of the reply using it.

The client polls the events view while the turn streams (every frame is flushed at once), the
way `chat --url` does; the order it sees is the order it prints.
"""

from __future__ import annotations

import uuid
from typing import Any

from turnkeep.envelope import open_envelope_store
from turnkeep.events import Event, turn_events
from turnkeep.harness import (
    HarnessDeps,
    HarnessLimits,
    ModelStepInput,
    StartTurnInput,
    ToolStepInput,
    model_step,
    run_turn,
    start_turn,
    tool_step,
)
from turnkeep.providers.base import StreamEvent
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import open_storage

TOOL_TURN = (
    'call calculator {"expression": "6*7"}\n'
    "call clock_now {}\n"
    "then\n"
    'call echo {"text": "second round"}'
)


def _deps() -> HarnessDeps:
    url = f"memory://{uuid.uuid4().hex}"
    envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
    envelopes.create("s1", "u1")
    return HarnessDeps(
        open_storage=lambda sid: open_storage(url, sid),
        envelopes=envelopes,
        provider=ScriptedProvider(),
        limits=HarnessLimits(frame_interval_ms=0),  # every delta is a frame at once
    )


class PollingClient:
    """Polls the turn's events with the cursor, as `chat --url` does, keeping what it saw."""

    def __init__(self, deps: HarnessDeps, op_id: str) -> None:
        self.deps = deps
        self.op_id = op_id
        self.cursor = 0
        self.seen: list[Event] = []

    def poll(self, _event: Any = None) -> None:
        with self.deps.open_storage("s1") as storage:
            page = turn_events(storage, self.deps.envelopes.get("s1"), self.op_id, self.cursor, 500)
        self.seen.extend(page.events)
        self.cursor = page.next_cursor


def _order_violations(seen: list[Event]) -> list[str]:
    """Frames of round r+1 shown before a tool result entry of round r."""
    problems = []
    for i, event in enumerate(seen):
        if event.kind == "entry" and event.role == "tool" and event.round is not None:
            for earlier in seen[:i]:
                if earlier.kind == "frame" and (earlier.round or 0) > event.round:
                    problems.append(f"tool result {event.entry_id} after frame seq {earlier.seq}")
    return problems


def test_a_polling_client_sees_each_tool_result_before_the_frames_of_the_next_round() -> None:
    deps = _deps()
    client = PollingClient(deps, "op1")

    def on_event(event: StreamEvent) -> None:
        client.poll(event)

    result = run_turn(deps, "s1", "u1", TOOL_TURN, op_id="op1", on_event=on_event)
    client.poll()

    assert result.status == "completed"
    assert result.rounds == 3
    tool_entries = [e for e in client.seen if e.kind == "entry" and e.role == "tool"]
    assert len(tool_entries) == 3
    later_frames = [e for e in client.seen if e.kind == "frame" and (e.round or 0) >= 1]
    assert later_frames, "the test must see frames of the rounds after the tools"
    assert _order_violations(client.seen) == []
    seqs = [e.seq for e in client.seen]
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == len(seqs)


def test_tool_results_are_entries_before_the_next_model_round_streams() -> None:
    # The Step Functions path runs the same steps one by one: check the storage itself.
    deps = _deps()
    start_turn(deps, StartTurnInput(session_id="s1", op_id="op1", user_id="u1", text=TOOL_TURN))
    first = model_step(deps, ModelStepInput(session_id="s1", op_id="op1", round=0))
    for call_id in first.call_ids:
        tool_step(deps, ToolStepInput(session_id="s1", op_id="op1", call_id=call_id))
    tool_entry_seqs: list[int] = []

    def on_event(_event: StreamEvent) -> None:
        if tool_entry_seqs:
            return
        with deps.open_storage("s1") as storage:
            tool_entry_seqs.extend(
                e.seq for e in storage.scan_entries() if e.id.startswith("op1:r0:")
            )

    round_1 = ModelStepInput(session_id="s1", op_id="op1", round=1)
    second = model_step(deps, round_1, on_event=on_event)

    assert second.next == "tools"
    assert len(tool_entry_seqs) == 2  # both results of round 0 were entries while round 1 streamed


def test_an_entry_type_with_a_registered_builder_becomes_its_own_event() -> None:
    from turnkeep.events import EventRegistry
    from turnkeep.storage import Entry

    def as_notice(entry: Entry) -> Event:
        return Event(seq=entry.seq, kind="entry", entry_id=entry.id, role="notice")

    registry = EventRegistry({"test-notice": as_notice})
    notice = Entry(id="n1", parent_id=None, type="test-notice", data={}, seq=7)
    message = Entry(id="m1", parent_id=None, type="message", data={}, seq=8)

    assert registry.event(notice).role == "notice"
    assert registry.event(message).role == "message"


def test_the_default_registry_shows_approval_entries_as_approval_events() -> None:
    from turnkeep.events import entry_event
    from turnkeep.harness.approvals import APPROVAL_DECIDED, APPROVAL_REQUESTED
    from turnkeep.storage import Entry

    data = {"call_id": "c1", "name": "t", "arguments": {}, "decision": "approve", "round": 0}
    requested = Entry(id="a1", parent_id=None, type=APPROVAL_REQUESTED, data=data, seq=3)
    decided = Entry(id="a2", parent_id=None, type=APPROVAL_DECIDED, data=data, seq=4)

    assert entry_event(requested).kind == "approval_requested"
    assert entry_event(decided).kind == "approval_decided"
    assert entry_event(decided).decision == "approve"
