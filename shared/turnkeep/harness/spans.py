"""The model step's spans from the harness's own types (docs/tracing.md): the round's `chat`
span and its context shrink. A no-op when tracing is off (`turnkeep.telemetry`)."""

from __future__ import annotations

from contextlib import AbstractContextManager

from turnkeep.harness.context import PreparedRound
from turnkeep.harness.state import OperationState
from turnkeep.providers.base import ModelProvider, ModelRequest
from turnkeep.telemetry import SpanRecorder, genai


def round_span(
    state: OperationState, provider: ModelProvider, request: ModelRequest
) -> AbstractContextManager[SpanRecorder]:
    """The `chat` span of the round `state` is at, around its provider call."""
    model = state.model or getattr(provider, "model_id", None) or provider.name
    return genai.chat_span(
        state.trace_parent,
        session_id=state.session_id,
        op_id=state.op_id,
        round_=state.round,
        provider_name=provider.name,
        model=str(model),
        request=request,
    )


def compaction_span_of(state: OperationState, prepared: PreparedRound) -> None:
    """The span of the round's context shrink, if it had one."""
    plan = prepared.plan
    if plan.action == "none" or prepared.shrink_started_at is None:
        return
    genai.compaction_span(
        state.trace_parent,
        op_id=state.op_id,
        round_=state.round,
        start=prepared.shrink_started_at,
        end=prepared.shrink_ended_at or prepared.shrink_started_at,
        strategy=plan.action,
        tokens_before=plan.tokens_before,
        tokens_after=prepared.tokens,
        usage=prepared.usage,
    )
