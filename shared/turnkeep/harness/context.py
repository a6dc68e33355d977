"""The context budget of a model round: estimate the request, and when it outgrows the
threshold leave out (window) or summarize (compaction) the oldest whole turns.

Budget = the model's context minus its output reserve (`ModelProvider.context`). Tokens are
estimated at 4 characters a token, scaled by the session's calibration (the provider-reported
input tokens of the latest round over that round's estimate); an assistant reply counts as the
output tokens the provider reported for it. Storage keeps every entry: a plan changes only what
the model is sent, and records that in a `compaction` / `context_window` marker entry plus the
`context.start` value that bounds later reads (docs/harness.md, "Context budget").
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from turnkeep.harness.deps import HarnessLimits
from turnkeep.harness.transcript import (
    COMPACTION_ENTRY_TYPE,
    WINDOW_ENTRY_TYPE,
    BranchView,
    ViewItem,
    context_start_address,
    model_view,
    tool_message,
    usage_json,
)
from turnkeep.providers.base import (
    Message,
    ModelProvider,
    ModelRequest,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from turnkeep.providers.compaction import (
    COMPACTION_SYSTEM_PROMPT,
    compaction_input,
    summary_message,
)
from turnkeep.providers.context import ContextWindow
from turnkeep.providers.prices import Price
from turnkeep.providers.settings import ModelSettings
from turnkeep.spend.pricing import price_for, priced, usage_row
from turnkeep.storage import JsonValue, Write, insert_entry, insert_usage, set_value

CHARS_PER_TOKEN: Final = 4
MESSAGE_OVERHEAD_TOKENS: Final = 4
"""Role and framing tokens a provider adds per message (calibration absorbs the rest)."""
MIN_CALIBRATION, MAX_CALIBRATION = 0.5, 4.0

Action = Literal["none", "window", "compaction"]


class ContextBudgetError(Exception):
    """The round cannot fit the model's budget; the message names both numbers."""


class NothingToShrinkError(ContextBudgetError):
    """Over the budget (or a forced target) with no older turn left to leave out."""

    def __init__(self, message: str, *, verb: str) -> None:
        super().__init__(message)
        self.verb = verb


def text_tokens(text: str) -> int:
    """The uncalibrated estimate of `text`: 4 characters a token, rounded up."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def message_tokens(message: Message) -> int:
    """The uncalibrated estimate of one message: its parts' text plus the framing overhead."""
    size = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            size += len(part.text)
        elif isinstance(part, ToolCallPart):
            size += len(part.name) + len(part.arguments)
        elif isinstance(part, ToolResultPart):
            size += len(part.content)
        elif isinstance(part, ReasoningPart):
            # Sent back to Claude (signed or redacted), so it takes room in the request.
            size += len(part.text) + len(part.redacted)
    return (size + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN + MESSAGE_OVERHEAD_TOKENS


def tools_tokens(specs: Sequence[ToolSpec]) -> int:
    """The uncalibrated estimate of the tool specs a request carries."""
    if not specs:
        return 0
    return text_tokens(json.dumps([[s.name, s.description, s.input_schema] for s in specs]))


def request_tokens(request: ModelRequest) -> int:
    """The uncalibrated estimate of a whole request (what the calibration compares against)."""
    return (
        text_tokens(request.system)
        + tools_tokens(request.tools)
        + sum(message_tokens(m) for m in request.messages)
    )


def summary_cap(budget: int) -> int:
    """Tokens a compaction summary may use: an eighth of the budget, between 64 and 2000."""
    return max(64, min(2000, budget // 8))


@dataclass(frozen=True, slots=True)
class ContextPlan:
    """What one round sends: `kept` items after `summary`, and what changed to get there."""

    action: Action
    kept: tuple[ViewItem, ...]
    dropped: tuple[ViewItem, ...]
    summary: str | None
    tokens_before: int
    tokens: int
    """Calibrated estimate of the request this plan sends (the summary of a compaction is
    counted at its cap until it is written)."""
    dropped_turns: int = 0


@dataclass
class PreparedRound:
    """The request of a round plus the writes that record how its context was shaped."""

    request: ModelRequest
    plan: ContextPlan
    writes: list[Write] = field(default_factory=list)
    head: str | None = None
    """Parent of the round's response entry (the marker entry when one is written)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens the compaction call used (added to the turn's usage)."""
    estimated_input: int = 0
    """Uncalibrated estimate of the request (stored for the next rounds' calibration)."""
    tokens: int = 0
    """Calibrated estimate of the request."""
    shrink_started_at: float | None = None
    shrink_ended_at: float | None = None
    """When the shrink (compaction call or window) began and ended: its timeline bar."""


def _calibrated(tokens: int, factor: float) -> int:
    return math.ceil(tokens * factor)


def _turns(items: Sequence[ViewItem]) -> list[list[ViewItem]]:
    """Items grouped into whole turns: a turn starts at its user message (tool calls and their
    results always fall in the same turn)."""
    turns: list[list[ViewItem]] = []
    for item in items:
        if item.turn_start or not turns:
            turns.append([item])
        else:
            turns[-1].append(item)
    return turns


def plan_context(
    view: BranchView,
    *,
    system: str,
    tools: Sequence[ToolSpec],
    pending: Sequence[ToolResultPart],
    window: ContextWindow,
    limits: HarnessLimits,
    target: int | None = None,
) -> ContextPlan:
    """Fit the branch into `window`: keep it whole under the threshold, else leave out or mark
    for compaction the oldest whole turns down to `context_keep` of the budget (or `target`).

    Raises ContextBudgetError when the current turn alone (with the system prompt and tools)
    exceeds the budget, or nothing older is left to leave out.
    """
    factor = min(MAX_CALIBRATION, max(MIN_CALIBRATION, view.calibration))
    budget = window.input_budget

    def cost(item: ViewItem) -> int:
        if item.known_tokens is not None:
            return item.known_tokens + MESSAGE_OVERHEAD_TOKENS
        return _calibrated(message_tokens(item.message), factor)

    fixed = _calibrated(text_tokens(system) + tools_tokens(tools), factor)
    if pending:
        fixed += _calibrated(message_tokens(tool_message(list(pending))), factor)
    summary = view.marker.summary if view.marker is not None else None
    summary_tokens = _calibrated(message_tokens(summary_message(summary)), factor) if summary else 0
    turns = _turns(view.items)
    costs = [sum(cost(i) for i in turn) for turn in turns]
    total = fixed + summary_tokens + sum(costs)
    current = fixed + (costs[-1] if costs else 0)
    if current > budget:
        raise ContextBudgetError(
            f"context_budget: the current turn alone needs about {current} tokens, more than "
            f"the model's input budget of {budget} tokens (context {window.tokens}, "
            f"{window.output_reserve} reserved for output)"
        )
    limit = math.floor(limits.context_threshold * budget) if target is None else target
    if total <= limit:
        return ContextPlan("none", view.items, (), summary, total, total)
    goal = math.floor(limits.context_keep * budget)
    if target is not None:
        goal = min(goal, target)
    action: Action = limits.context_strategy
    new_summary = summary_cap(budget) if action == "compaction" else summary_tokens
    room = goal - fixed - new_summary
    dropped = 0
    while dropped < len(turns) - 1 and sum(costs[dropped:]) > room:
        dropped += 1
    if dropped == 0:
        if target is None and total <= budget:
            return ContextPlan("none", view.items, (), summary, total, total)
        verb = "summarize" if action == "compaction" else "leave out"
        raise NothingToShrinkError(
            f"context_budget: the request needs about {total} tokens, more than the model's "
            f"input budget of {budget} tokens (context {window.tokens}, "
            f"{window.output_reserve} reserved for output), and no older turn is left to {verb}",
            verb=verb,
        )
    kept = tuple(i for turn in turns[dropped:] for i in turn)
    left_out = tuple(i for turn in turns[:dropped] for i in turn)
    after = fixed + new_summary + sum(costs[dropped:])
    return ContextPlan(action, kept, left_out, summary, total, after, dropped)


def prepare_round(
    provider: ModelProvider,
    view: BranchView,
    *,
    system: str,
    tools: tuple[ToolSpec, ...],
    pending: Sequence[ToolResultPart],
    limits: HarnessLimits,
    op_id: str,
    round_: int,
    head: str | None,
    target: int | None = None,
    settings: ModelSettings | None = None,
    clock: Callable[[], float] = time.time,
) -> PreparedRound:
    """The round's request within the model's budget, compacting first when the plan says so.

    `settings` (the turn's model settings) go on the round's request, not on a compaction's.

    Raises ContextBudgetError (the turn cannot fit) and the compaction call's ModelError.
    """
    window = provider.context
    plan = plan_context(
        view,
        system=system,
        tools=tools,
        pending=pending,
        window=window,
        limits=limits,
        target=target,
    )
    summary, usage = plan.summary, Usage()
    writes: list[Write] = []
    shrink_started = clock()
    if plan.action == "compaction":
        summary, usage, writes = _compaction(
            provider,
            plan,
            view.calibration,
            target,
            price=price_for(provider, settings),
            op_id=op_id,
        )
    messages: list[Message] = []
    if summary:
        messages.append(summary_message(summary))
    messages.extend(item.message for item in plan.kept)
    if pending:
        messages.append(tool_message(list(pending)))
    request = ModelRequest(
        system=system, messages=model_view(messages), tools=tools, settings=settings
    )
    estimated = request_tokens(request)
    factor = min(MAX_CALIBRATION, max(MIN_CALIBRATION, view.calibration))
    tokens = _calibrated(estimated, factor)
    if plan.action != "none" and tokens > window.input_budget:
        raise ContextBudgetError(
            f"context_budget: after {plan.action} the request still needs about {tokens} "
            f"tokens, more than the model's input budget of {window.input_budget} tokens "
            f"(context {window.tokens}, {window.output_reserve} reserved for output)"
        )
    prepared = PreparedRound(request, plan, writes, head, usage, estimated, tokens)
    if plan.action != "none":
        prepared.shrink_started_at, prepared.shrink_ended_at = shrink_started, clock()
        _add_marker(prepared, summary, window, op_id=op_id, round_=round_)
    return prepared


def _compaction(
    provider: ModelProvider,
    plan: ContextPlan,
    calibration: float,
    target: int | None,
    *,
    price: Price,
    op_id: str,
) -> tuple[str, Usage, list[Write]]:
    """The compaction's summary, the tokens it used and the usage row that records them."""
    window = provider.context
    # After a context_length error the provider's real limit is below the estimate: the
    # compaction request must stay under the target too.
    limit = window.input_budget if target is None else min(window.input_budget, target)
    summary, usage = _compact(provider, plan, calibration, window.input_budget, limit)
    usage = priced(usage, price)
    return summary, usage, [insert_usage(usage_row(usage, getattr(provider, "name", None), op_id))]


def _add_marker(
    prepared: PreparedRound,
    summary: str | None,
    window: ContextWindow,
    *,
    op_id: str,
    round_: int,
) -> None:
    """Record the plan in a marker entry (the response's new parent) and `context.start`."""
    plan = prepared.plan
    # Not under `{op}:r{round}:`, where tool results live (a call id may be any text).
    marker_id = f"{op_id}:c{round_}:{plan.action}"
    first_kept = plan.kept[0].entry_id
    data: dict[str, JsonValue] = {
        "op": op_id,
        "round": round_,
        "first_kept_id": first_kept,
        "summary": summary,
        "tokens_before": plan.tokens_before,
        "tokens_after": prepared.tokens,
        "budget": window.input_budget,
        "dropped_turns": plan.dropped_turns,
        "dropped_messages": len(plan.dropped),
        "timing": {"started_at": prepared.shrink_started_at, "ended_at": prepared.shrink_ended_at},
        "usage": usage_json(prepared.usage),
    }
    entry_type = COMPACTION_ENTRY_TYPE if plan.action == "compaction" else WINDOW_ENTRY_TYPE
    prepared.writes.extend(
        [
            insert_entry(marker_id, prepared.head, entry_type, data),
            set_value(
                context_start_address(),
                {"entry_id": marker_id, "first_kept_id": first_kept},
            ),
        ]
    )
    prepared.head = marker_id


def _compact(
    provider: ModelProvider, plan: ContextPlan, calibration: float, budget: int, limit: int
) -> tuple[str, Usage]:
    """One model call with the compaction prompt over the previous summary and the left-out
    turns, its input sized to `limit` tokens; a summary over its cap is cut visibly."""
    factor = min(MAX_CALIBRATION, max(MIN_CALIBRATION, calibration))
    cap = summary_cap(budget)
    room = limit - _calibrated(text_tokens(COMPACTION_SYSTEM_PROMPT), factor) - 64
    max_chars = max(1000, int(room * CHARS_PER_TOKEN / factor * 0.9))
    text = compaction_input(plan.summary, [i.message for i in plan.dropped], max_chars)
    response = provider.complete(
        ModelRequest(
            system=COMPACTION_SYSTEM_PROMPT,
            messages=(Message("user", (TextPart(text),)),),
            tools=(),
            max_tokens=cap,
        )
    )
    summary = response.message.text.strip()
    limit = int(cap * CHARS_PER_TOKEN / factor)
    if len(summary) > limit:
        summary = summary[:limit] + f" […summary cut at about {cap} tokens]"
    return summary, response.usage
