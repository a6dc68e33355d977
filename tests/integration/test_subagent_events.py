"""A parent turn's events hold its sub-agents' child turns' events, nested under their calls,
while the child runs and after; every page size reads the same merged stream once, and a
grandchild nests twice (docs/api.md, "Sub-agent events")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.integration.turns_support import USER, Harness, make_turn_harness
from turnkeep import Agent, ToolContext, tool
from turnkeep.envelope import Envelope
from turnkeep.envelope.keys import turn_run_id
from turnkeep.events import Event, TurnCursor, nested_turn_events
from turnkeep.harness import run_turn
from turnkeep.harness.subagents import child_ids
from turnkeep.storage import Storage, open_storage

SEEN_WHILE_RUNNING: list[list[Event]] = []
"""What the parent's merged page held, read by the child's own tool while the child ran."""

HARNESS: list[Harness] = []


def _opener(h: Harness) -> Any:
    @contextmanager
    def open_child(session_id: str) -> Iterator[tuple[Storage, Envelope | None] | None]:
        envelope = h.envelopes.get(session_id)
        if envelope is None:
            yield None
            return
        with open_storage(h.storage_url, session_id) as storage:
            yield storage, envelope

    return open_child


def _read_all(h: Harness, op_id: str, agent: Agent, limit: int) -> tuple[list[Event], bool]:
    """Every page of the parent's merged events after the start, `limit` at a time."""
    cursor, events = TurnCursor(), []
    for _ in range(500):
        with h.storage() as storage:
            merged = nested_turn_events(
                storage,
                h.envelopes.get(h.session_id),
                op_id,
                cursor,
                limit,
                agent=agent,
                open_child=_opener(h),
            )
        events += merged.page.events
        cursor = TurnCursor.parse(merged.page.next_cursor)
        if merged.page.finished:
            return events, True
        if not merged.page.events:
            return events, False
    raise AssertionError("the pages never ended")


@tool(isolation="in_process")
def peek(ctx: ToolContext) -> str:
    """Read the parent's events now (the test's window into a running child)."""
    h = HARNESS[0]
    op_id = turn_run_id(h.meta())
    assert op_id is not None
    events, finished = _read_all(h, op_id, TRIAGE, 1000)
    assert not finished
    SEEN_WHILE_RUNNING.append(events)
    return "peeked"


EDITOR = Agent(name="editor", instructions="You edit.", tools=[peek])
WRITER = Agent(name="writer", instructions="You write.", agents=[EDITOR])
TRIAGE = Agent(name="triage", agents=[WRITER])


def _call(name: str, task: str) -> str:
    return f"call {name} {json.dumps({'input': task})}"


@pytest.fixture
def ran(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Harness, str]:
    h = make_turn_harness(tmp_path, request.param)
    h.deps.agent = TRIAGE
    HARNESS[:] = [h]
    SEEN_WHILE_RUNNING.clear()
    result = run_turn(h.deps, h.session_id, USER, _call("writer", _call("editor", "call peek {}")))
    assert result.status == "completed"
    return h, result.op_id


@pytest.mark.parametrize("ran", ["memory", "sqlite"], indirect=True)
def test_the_parent_events_hold_the_child_and_grandchild_events_nested_under_their_calls(
    ran: tuple[Harness, str],
) -> None:
    h, op_id = ran
    events, finished = _read_all(h, op_id, TRIAGE, 1000)

    assert finished
    own = [e for e in events if not e.nested]
    child = [e for e in events if e.nested and len(e.nested) == 1]
    grandchild = [e for e in events if e.nested and len(e.nested) == 2]
    (call_entry,) = [e for e in own if e.role == "assistant" and e.parts and e.round == 0]
    (call_part,) = [p for p in call_entry.parts or [] if p["kind"] == "tool_call"]
    child_session, child_op = child_ids(h.session_id, op_id, call_part["id"])
    assert {(n.agent, n.session_id, n.op_id, n.depth) for e in child for n in e.nested or []} == {
        ("writer", child_session, child_op, 1)
    }
    assert {tuple((n.agent, n.depth) for n in e.nested or []) for e in grandchild} == {
        (("writer", 1), ("editor", 2))
    }
    # The child's own user message is the task, and its tool result names the grandchild.
    assert child[0].role == "user"
    assert [e.role for e in grandchild if e.role == "tool"] == ["tool"]
    # Nested events come after the call's entry and before the parent's result of it.
    position = {id(e): i for i, e in enumerate(events)}
    (parent_result,) = [e for e in own if e.role == "tool"]
    assert all(
        position[id(call_entry)] < position[id(e)] < position[id(parent_result)]
        for e in child + grandchild
    )


@pytest.mark.parametrize("ran", ["memory", "sqlite"], indirect=True)
def test_every_page_size_reads_the_same_merged_events_once(ran: tuple[Harness, str]) -> None:
    h, op_id = ran
    whole, _ = _read_all(h, op_id, TRIAGE, 1000)

    def key(e: Event) -> tuple[Any, ...]:
        return (tuple(n.op_id for n in e.nested or []), e.seq, e.kind, e.entry_id)

    for limit in (1, 2, 3, 5):
        paged, finished = _read_all(h, op_id, TRIAGE, limit)
        assert finished, limit
        assert sorted(map(key, paged)) == sorted(map(key, whole)), limit
        assert len(set(map(key, paged))) == len(paged), limit


@pytest.mark.parametrize("ran", ["memory", "sqlite"], indirect=True)
def test_a_running_child_s_events_are_in_the_parent_events_before_the_call_ends(
    ran: tuple[Harness, str],
) -> None:
    (seen,) = SEEN_WHILE_RUNNING
    nested = [e for e in seen if e.nested]

    # Read inside the grandchild's tool: the child and grandchild have begun, no result yet.
    assert next(e.role for e in nested if len(e.nested or []) == 1) == "user"
    grandchild_calls = [
        p["name"]
        for e in nested
        if len(e.nested or []) == 2 and e.role == "assistant"
        for p in e.parts or []
        if p["kind"] == "tool_call"
    ]
    assert grandchild_calls == ["peek"]
    assert not [e for e in seen if not e.nested and e.role == "tool"]


def test_a_cursor_reads_back_from_its_token_and_refuses_anything_else() -> None:
    cursor = TurnCursor(seq=12, children=(("a" * 24, 5),))

    assert TurnCursor.parse(cursor.token()) == cursor
    assert TurnCursor.parse("12") == TurnCursor(seq=12)
    assert TurnCursor().token() == 0
    for bad in ("x", "-1", "12:zz=1", "١٢", "12:" + "a" * 24 + "=99999999999999999999"):
        with pytest.raises(ValueError, match="cursor"):
            TurnCursor.parse(bad)
