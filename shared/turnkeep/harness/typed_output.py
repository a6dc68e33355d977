"""Typed results in the harness: the `final_result` tool a typed turn offers, when a round must
call it, and what a settled round's submission decides (docs/agent.md, "Typed results").

The submission is validated when its round settles, in the model step: validation is pure, so
it costs no tool step, and the round's one commit records the call's result with the decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from turnkeep.agent.output import (
    FINAL_RESULT_DESCRIPTION,
    FINAL_RESULT_TOOL,
    OUTPUT_INVALID,
    OutputInvalidError,
    OutputSpec,
)
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.state import OperationState
from turnkeep.providers.base import ModelResponse, ToolSpec

ACCEPTED_TEXT = "The result is valid and recorded; the turn ends."
NOT_RUN_TEXT = "Error: tool call not run: the turn ended with its final result."
NO_ROUND_LEFT_ERROR = (
    f"the last round the turn allows called other tools, not {FINAL_RESULT_TOOL}: no round "
    "is left to submit the result"
)
TEXT_ONLY_ERROR = (
    f"the reply was text without a {FINAL_RESULT_TOOL} call: this turn must end by calling "
    f"{FINAL_RESULT_TOOL} with its result"
)


def turn_output(deps: HarnessDeps, state: OperationState) -> OutputSpec | None:
    """The output the turn must end with: its own schema (checked at its start), else the
    agent's `output_type`; None for a text turn."""
    if state.output_schema is not None:
        return OutputSpec.from_schema(state.output_schema)
    return deps.agent.output


def final_result_spec(spec: OutputSpec) -> ToolSpec:
    """The `final_result` tool offered with the agent's tools."""
    return ToolSpec(FINAL_RESULT_TOOL, FINAL_RESULT_DESCRIPTION, spec.tool_schema)


def must_end(deps: HarnessDeps, state: OperationState, *, wrap_up: bool) -> bool:
    """A round that must end the turn calls `final_result` (a forced tool choice): the
    wrap-up round, the last round `max_steps` allows, a round after a text-only reply."""
    return wrap_up or state.force_final_result or state.round + 1 >= deps.limits.max_steps


@dataclass(slots=True)
class OutputDecision:
    """What a typed round's settlement does: the calls it answers now (`answered`: id ->
    content, is_error), the state update, and the next action when the result decides it."""

    answered: dict[str, tuple[str, bool]] = field(default_factory=dict)
    update: dict[str, Any] = field(default_factory=dict)
    next: Literal["finish", "fail"] | None = None
    error: str | None = None


def decide_output(
    spec: OutputSpec, state: OperationState, response: ModelResponse, retries: int, *, ends: bool
) -> OutputDecision:
    """Validate the round's first `final_result` call (a later one is answered as not run).

    Valid: the output is recorded, the round's other calls are not run, the turn finishes.
    Invalid (or no call on a text-only reply): one more failure; past `retries`, or on a round
    that had to end the turn (`ends`, the wrap-up), the turn fails `output_invalid`.
    """
    calls = response.message.tool_calls
    submitted = [c for c in calls if c.name == FINAL_RESULT_TOOL]
    decision = OutputDecision()
    if not submitted:
        if calls and not ends:
            return decision  # an ordinary tool round
        error = NO_ROUND_LEFT_ERROR if calls else TEXT_ONLY_ERROR
        return _failed(decision, state, [error], retries, ends=ends, text_only=not calls)
    first, *later = submitted
    for extra in later:
        decision.answered[extra.id] = (
            f"Error: only the first {FINAL_RESULT_TOOL} call of a round counts",
            True,
        )
    try:
        value = spec.validate(first.arguments)
    except OutputInvalidError as exc:
        decision.answered[first.id] = (exc.tool_text(), True)
        return _failed(decision, state, list(exc.errors), retries, ends=ends, text_only=False)
    decision.answered[first.id] = (ACCEPTED_TEXT, False)
    for call in calls:
        decision.answered.setdefault(call.id, (NOT_RUN_TEXT, True))
    decision.update = {"output": value, "force_final_result": False}
    decision.next = "finish"
    return decision


def _failed(
    decision: OutputDecision,
    state: OperationState,
    errors: list[str],
    retries: int,
    *,
    ends: bool,
    text_only: bool,
) -> OutputDecision:
    failures = state.output_failures + 1
    decision.update = {"output_failures": failures, "force_final_result": text_only}
    if failures > retries or ends:
        decision.update["output_errors"] = errors
        decision.next = "fail"
        decision.error = (
            f"{OUTPUT_INVALID}: the result was invalid after {failures} attempt(s): "
            + "; ".join(errors)
        )
    return decision
