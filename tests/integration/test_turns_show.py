"""The Show test: a multi-round turn with two tool calls per round, on memory and SQLite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.turns_support import USER, make_turn_harness
from turnkeep.harness import HarnessLimits, run_turn
from turnkeep.harness.state import load_call, load_record, load_state
from turnkeep.harness.transcript import model_view
from turnkeep.providers.base import TextPart, ToolCallPart, ToolResultPart, check_transcript
from turnkeep.storage import Entry, Storage
from turnkeep.system_prompt import WORKING_NOTES_HEADING

TWO_ROUNDS = (
    'call calculator {"expression": "6*7"}\n'
    'call echo {"text": "first"}\n'
    "then\n"
    'call calculator {"expression": "2**10"}\n'
    'call echo {"text": "second"}'
)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_multi_round_turn_with_parallel_tools_settles_transcript_folds_notes_and_retires_scope(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend, limits=HarnessLimits())  # default 50 ms / 2 KiB frames

    noted = run_turn(h.deps, h.session_id, USER, "remember the launch code word is tulip")
    result = run_turn(h.deps, h.session_id, USER, TWO_ROUNDS, op_id="op-show")

    assert noted.status == "completed"
    assert result.status == "completed"
    assert result.rounds == 3
    messages = h.transcript()
    check_transcript(messages)
    turn = messages[messages.index(next(m for m in messages if m.text == TWO_ROUNDS)) :]
    assert [m.role for m in turn] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    round0 = [(c.name, json.loads(c.arguments)) for c in turn[1].tool_calls]
    assert round0 == [("calculator", {"expression": "6*7"}), ("echo", {"text": "first"})]
    results = [p for m in turn if m.role == "tool" for p in m.parts]
    assert all(isinstance(p, ToolResultPart) for p in results)
    assert [(p.call_id, p.content) for p in results if isinstance(p, ToolResultPart)] == [
        (turn[1].tool_calls[0].id, "42"),
        (turn[1].tool_calls[1].id, "first"),
        (turn[4].tool_calls[0].id, "1024"),
        (turn[4].tool_calls[1].id, "second"),
    ]
    assert turn[-1].parts == (
        TextPart(
            "Tool calculator returned: 42\nTool echo returned: first\n"
            "Tool calculator returned: 1024\nTool echo returned: second"
        ),
    )
    # The note written by the first turn is folded into every round of the second turn.
    second_turn_requests = h.provider.requests[2:]
    assert len(second_turn_requests) == 3
    for request in second_turn_requests:
        assert WORKING_NOTES_HEADING in request.system
        assert "the launch code word is tulip" in request.system
    # The operation is over: state and call states gone, record kept, scope retired.
    with h.storage() as storage:
        assert load_state(storage, "op-show") is None
        record = load_record(storage, "op-show")
        assert record is not None
        assert record.status == "completed"
        for message in turn:
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    assert load_call(storage, "op-show", part.id) is None
    assert h.scope_residue("op-show") == 0
    assert h.meta()["turnStatus"] == "completed"
    assert h.meta()["turnRunId"] == "op-show"


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_remember_then_recall_in_the_next_turn_quotes_the_notes(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)

    run_turn(h.deps, h.session_id, USER, "remember alpha")
    run_turn(h.deps, h.session_id, USER, "remember beta")
    recall = run_turn(h.deps, h.session_id, USER, "what do you remember?")

    assert recall.status == "completed"
    assert h.envelopes.get(h.session_id).working_notes == "alpha\nbeta"  # type: ignore[union-attr]
    assert h.transcript()[-1].text == "Here is what I remember:\nalpha\nbeta"


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_model_round_of_a_long_session_reads_only_the_entries_new_since_the_last_round(
    tmp_path: Path, backend: str
) -> None:
    scanned: list[int] = []

    class Counting:
        def __init__(self, inner: Storage) -> None:
            self._inner = inner

        def scan_entries(self, **kwargs: Any) -> list[Entry]:
            entries = self._inner.scan_entries(**kwargs)
            scanned.append(len(entries))
            return entries

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    h = make_turn_harness(tmp_path, backend, open_wrapper=Counting)
    for i in range(10):
        run_turn(h.deps, h.session_id, USER, f'call echo {{"text": "{i}"}}')
    with h.storage() as storage:
        total = storage.get_stats().entry_count
    scanned.clear()

    run_turn(h.deps, h.session_id, USER, 'call echo {"text": "last"}')

    assert total == 40
    assert len(scanned) == 2  # one read per model round
    assert sum(scanned) <= 6  # the new entries only, never the whole session again
    final_request = h.provider.requests[-1]
    assert final_request.messages == model_view(h.transcript()[:-1])
