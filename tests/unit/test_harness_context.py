"""plan_context: which whole turns a round keeps within the model's budget."""

from __future__ import annotations

import pytest

from turnkeep.harness import HarnessLimits
from turnkeep.harness.context import ContextBudgetError, plan_context, summary_cap
from turnkeep.harness.transcript import BranchView, ContextMarker, ViewItem
from turnkeep.providers.base import (
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    check_transcript,
)
from turnkeep.providers.context import ContextWindow

SYSTEM = "You are helpful. " * 20


def _turn(n: int, *, words: int = 40, tools: bool = True) -> list[ViewItem]:
    items = [ViewItem(f"t{n}:user", Message("user", (TextPart("ask " * words),)), True, None)]
    if tools:
        call = ToolCallPart(f"c{n}", "echo", '{"text": "' + "x" * 80 + '"}')
        items += [
            ViewItem(f"t{n}:r0", Message("assistant", (call,)), False, None),
            ViewItem(
                f"t{n}:res",
                Message("tool", (ToolResultPart(f"c{n}", "echo", "y" * 80),)),
                False,
                None,
            ),
        ]
    items.append(ViewItem(f"t{n}:r1", Message("assistant", (TextPart("done " * 20),)), False, None))
    return items


def _view(turns: int, marker: ContextMarker | None = None) -> BranchView:
    return BranchView(tuple(i for n in range(turns) for i in _turn(n)), marker, 1.0)


def _limits(strategy: str = "window") -> HarnessLimits:
    return HarnessLimits(context_strategy=strategy, context_threshold=0.8, context_keep=0.5)  # type: ignore[arg-type]


def test_a_branch_under_the_threshold_is_sent_whole() -> None:
    view = _view(3)

    plan = plan_context(
        view,
        system=SYSTEM,
        tools=(),
        pending=(),
        window=ContextWindow(100_000, 1000),
        limits=_limits(),
    )

    assert plan.action == "none"
    assert plan.kept == view.items


def test_a_window_drops_whole_old_turns_never_the_current_one_and_never_splits_a_call() -> None:
    view = _view(40)
    window = ContextWindow(4000, 1000)

    plan = plan_context(view, system=SYSTEM, tools=(), pending=(), window=window, limits=_limits())

    assert plan.action == "window"
    assert plan.dropped_turns >= 1
    assert plan.kept[0].turn_start
    assert plan.kept[-len(_turn(39)) :] == tuple(_turn(39))
    assert plan.dropped + plan.kept == view.items
    check_transcript([i.message for i in plan.kept])  # every kept call has its result
    assert plan.tokens <= 0.5 * window.input_budget < plan.tokens_before


def test_a_compaction_plan_keeps_room_for_the_summary() -> None:
    view = _view(40)
    window = ContextWindow(4000, 1000)

    window_plan = plan_context(
        view, system=SYSTEM, tools=(), pending=(), window=window, limits=_limits()
    )
    compaction = plan_context(
        view, system=SYSTEM, tools=(), pending=(), window=window, limits=_limits("compaction")
    )

    assert compaction.action == "compaction"
    assert len(compaction.kept) < len(window_plan.kept)
    assert compaction.tokens <= 0.5 * window.input_budget
    assert summary_cap(window.input_budget) == 375


def test_a_window_carries_the_summary_of_the_latest_compaction_forward() -> None:
    marker = ContextMarker("m", "compaction", "t0:user", "an earlier summary")

    plan = plan_context(
        _view(40, marker),
        system=SYSTEM,
        tools=(),
        pending=(),
        window=ContextWindow(4000, 1000),
        limits=_limits(),
    )

    assert plan.summary == "an earlier summary"


def test_a_current_turn_alone_over_the_budget_is_an_error_naming_both_numbers() -> None:
    view = BranchView(tuple(_turn(0, words=2000)), None, 1.0)

    with pytest.raises(ContextBudgetError) as caught:
        plan_context(
            view,
            system=SYSTEM,
            tools=(),
            pending=(),
            window=ContextWindow(2000, 500),
            limits=_limits(),
        )

    message = str(caught.value)
    assert "the current turn alone needs about 2" in message
    assert "input budget of 1500 tokens (context 2000, 500 reserved for output)" in message


def test_a_target_below_the_threshold_forces_a_smaller_request() -> None:
    view = _view(6)
    window = ContextWindow(100_000, 1000)
    whole = plan_context(view, system=SYSTEM, tools=(), pending=(), window=window, limits=_limits())

    forced = plan_context(
        view,
        system=SYSTEM,
        tools=(),
        pending=(),
        window=window,
        limits=_limits(),
        target=whole.tokens // 2,
    )

    assert forced.action == "window"
    assert forced.tokens <= whole.tokens // 2


def test_reported_usage_calibrates_the_estimate() -> None:
    items = tuple(i for n in range(10) for i in _turn(n))
    window = ContextWindow(100_000, 1000)
    plain = plan_context(
        BranchView(items, None, 1.0),
        system=SYSTEM,
        tools=(),
        pending=(),
        window=window,
        limits=_limits(),
    )

    doubled = plan_context(
        BranchView(items, None, 2.0),
        system=SYSTEM,
        tools=(),
        pending=(),
        window=window,
        limits=_limits(),
    )

    assert doubled.tokens == pytest.approx(2 * plain.tokens, rel=0.02)
