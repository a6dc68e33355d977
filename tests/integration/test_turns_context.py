"""Long sessions: the context budget, windows, compaction and context_length recovery, end to end
through `run_turn` on the scripted model with a small context."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from tests.integration.turns_support import Harness, RecordingProvider, make_turn_harness
from turnkeep.events import transcript_page, turn_events
from turnkeep.harness import HarnessLimits, run_turn
from turnkeep.harness.state import load_head
from turnkeep.harness.transcript import branch_messages
from turnkeep.providers.base import (
    FatalModelError,
    ModelProvider,
    ModelRequest,
    StreamEvent,
)
from turnkeep.providers.compaction import is_compaction_request
from turnkeep.providers.context import ContextWindow
from turnkeep.providers.factory import provider_from_config
from turnkeep.providers.scripted import ScriptedProvider, input_token_count
from turnkeep.storage import fork_session, open_storage

USER = "user-1"


def _harness(
    tmp_path: Path,
    spec: str,
    strategy: Literal["compaction", "window"] = "compaction",
    backend: str = "memory",
) -> Harness:
    inner = provider_from_config(spec)
    recorder = RecordingProvider(inner=inner)
    recorder.context = inner.context
    limits = HarnessLimits(frame_interval_ms=0, context_strategy=strategy)
    return make_turn_harness(tmp_path, backend, provider=recorder, limits=limits)


def _chat(h: Harness, turns: int) -> list[str]:
    """Run `turns` varied turns (plain replies and tool calls); return their op ids."""
    ops = []
    for i in range(turns):
        if i % 4 == 3:
            text = f'call echo {{"text": "echo {i}"}}'
        else:
            text = f"message {i}: " + "lorem ipsum dolor " * (i % 7 + 2)
        result = run_turn(h.deps, h.session_id, USER, text)
        assert result.status == "completed", (i, result.error)
        ops.append(result.op_id)
    return ops


def _entry_types(h: Harness) -> dict[str, int]:
    counts: dict[str, int] = {}
    with h.storage() as storage:
        for entry in storage.scan_entries():
            counts[entry.type] = counts.get(entry.type, 0) + 1
    return counts


def _main_requests(h: Harness) -> list[ModelRequest]:
    return [r for r in h.provider.requests if not is_compaction_request(r.system)]


def test_a_few_hundred_turns_on_a_small_budget_keep_answering_with_the_notes_intact(
    tmp_path: Path,
) -> None:
    h = _harness(tmp_path, "scripted?context=3000")
    budget = h.provider.context.input_budget
    first = run_turn(h.deps, h.session_id, USER, "remember the launch code is 4711")
    assert first.status == "completed"

    _chat(h, 300)
    recall = run_turn(h.deps, h.session_id, USER, "what do you remember?")

    assert recall.status == "completed"
    assert "the launch code is 4711" in h.transcript()[-1].text
    assert all(input_token_count(r) <= budget for r in h.provider.requests)
    types = _entry_types(h)
    assert types["compaction"] >= 5
    # Nothing is lost: storage and the transcript API keep every message of 302 turns.
    with h.storage() as storage:
        page = transcript_page(storage, None, 5000)
        messages = branch_messages(storage, load_head(storage))
    assert len(page.entries) == sum(types.values())
    assert next(m.text for m in messages if m.role == "user") == "remember the launch code is 4711"
    assert sum(1 for m in messages if m.role == "user") == 302
    # The latest request starts with the summary, which still counts every earlier message.
    last = _main_requests(h)[-1]
    assert last.messages[0].text.startswith("[Summary of the earlier conversation (compacted)]")
    assert "First: 'remember the launch code is 4711'" in last.messages[0].text


def test_a_compaction_is_an_entry_of_the_session_tree_and_an_event_of_its_turn(
    tmp_path: Path,
) -> None:
    h = _harness(tmp_path, "scripted?context=3000")
    _chat(h, 40)

    with h.storage() as storage:
        compactions = [e for e in storage.scan_entries() if e.type == "compaction"]
        assert compactions
        marker = compactions[-1]
        data = marker.data
        assert isinstance(data, dict)
        kept = storage.get_entries([str(data["first_kept_id"])])
        events = turn_events(storage, None, str(data["op"]), None, 100)
    assert kept
    assert kept[0].id.endswith(":user")
    assert kept[0].seq < marker.seq
    assert isinstance(data["summary"], str)
    assert data["summary"].startswith("Earlier conversation")
    assert data["tokens_after"] < data["tokens_before"] <= data["budget"]
    named = [e for e in events.events if e.role == "compaction"]
    assert len(named) == 1
    assert named[0].parts == [{"kind": "compaction", **data}]
    # The marker sits on the branch: the turn's response follows it.
    assert any(e.parent_id == marker.id for e in events.events if e.role == "assistant")


def test_the_window_strategy_leaves_out_whole_old_turns_and_says_so_in_the_turn_events(
    tmp_path: Path,
) -> None:
    h = _harness(tmp_path, "scripted?context=3000", strategy="window")
    budget = h.provider.context.input_budget
    _chat(h, 80)

    types = _entry_types(h)
    assert types.get("compaction", 0) == 0
    assert types["context_window"] >= 2
    with h.storage() as storage:
        windows = [e for e in storage.scan_entries() if e.type == "context_window"]
        data = windows[-1].data
        assert isinstance(data, dict)
        events = turn_events(storage, None, str(data["op"]), None, 100)
    assert data["dropped_turns"] >= 1
    assert data["summary"] is None
    assert [e.role for e in events.events].count("context_window") == 1
    for request in _main_requests(h):
        assert input_token_count(request) <= budget
        # A window starts at a user message, and every call keeps its result (the provider
        # boundary check would refuse the request otherwise).
        assert request.messages[0].role == "user"


def test_a_current_turn_alone_over_the_budget_fails_naming_both_numbers_and_the_next_works(
    tmp_path: Path,
) -> None:
    h = _harness(tmp_path, "scripted?context=2000")
    _chat(h, 3)

    huge = run_turn(h.deps, h.session_id, USER, "word " * 3000)
    after = run_turn(h.deps, h.session_id, USER, "still there?")

    assert huge.status == "failed"
    assert huge.error is not None
    assert "the current turn alone needs about" in huge.error
    assert "input budget of 1500 tokens (context 2000, 500 reserved for output)" in huge.error
    assert after.status == "completed"
    assert h.transcript()[-1].text == "You said: still there?"


@dataclass
class _UnderCounting(ModelProvider):
    """A model whose real window is smaller than it claims: requests over `limit` input tokens
    fail with context_length, like a provider whose tokenizer counts more than the estimate."""

    limit: int
    reject_every_round: bool = False
    """Reject every request but a compaction's."""
    inner: ScriptedProvider = field(default_factory=ScriptedProvider)
    rejected: int = 0
    name: str = "undercounting"

    def __post_init__(self) -> None:
        self.context = ContextWindow(100_000, 1000)

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        over = input_token_count(request) > self.limit
        if over or (self.reject_every_round and not is_compaction_request(request.system)):
            self.rejected += 1
            raise FatalModelError("prompt is too long", code="context_length")
        yield from self.inner.stream(request)


def test_a_context_length_error_compacts_once_and_retries_the_round(tmp_path: Path) -> None:
    model = _UnderCounting(limit=1500)
    recorder = RecordingProvider(inner=model)
    recorder.context = model.context
    h = make_turn_harness(tmp_path, provider=recorder)

    _chat(h, 40)

    assert model.rejected >= 1
    types = _entry_types(h)
    # Every rejection led to exactly one compaction, and the retried round completed.
    assert types["compaction"] == model.rejected


def test_a_context_length_error_after_the_retry_fails_the_turn_honestly(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path, provider=RecordingProvider(inner=_UnderCounting(limit=2500)))
    h.provider.context = ContextWindow(100_000, 1000)
    _chat(h, 30)
    h.provider.inner = _UnderCounting(limit=2500, reject_every_round=True)
    before = len(h.provider.requests)

    result = run_turn(h.deps, h.session_id, USER, "hello")

    assert result.status == "failed"
    assert result.error is not None
    assert "model error (context_length) (after one compaction and a retry)" in result.error
    compaction_calls = [r for r in h.provider.requests[before:] if is_compaction_request(r.system)]
    assert len(compaction_calls) == 1
    assert len(h.provider.requests[before:]) == 3  # round, compaction, retried round


@pytest.mark.parametrize("strategy", ["compaction", "window"])
def test_a_fork_of_a_compacted_session_sees_every_entry_and_keeps_answering(
    tmp_path: Path, strategy: Literal["compaction", "window"]
) -> None:
    h = _harness(tmp_path, "scripted?context=3000", strategy=strategy)
    run_turn(h.deps, h.session_id, USER, "remember blue")
    _chat(h, 40)
    fork_id = f"{h.session_id}-fork"
    with h.storage() as source, open_storage(h.storage_url, fork_id) as target:
        fork_session(source, target)
        assert len(target.scan_entries()) == len(source.scan_entries())
    h.envelopes.create(fork_id, USER)

    result = run_turn(h.deps, fork_id, USER, "call echo {}")

    assert result.status == "completed"
    assert _main_requests(h)[-1].messages[0].role == "user"
