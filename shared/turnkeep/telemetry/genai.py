"""The turn's spans with the OpenTelemetry GenAI semantic conventions' names and attributes
(`invoke_agent`, `chat`, `execute_tool`; compaction and approval waits as turnkeep's own),
built from the harness's values (docs/tracing.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager

from turnkeep.providers.base import Message, ModelRequest, ModelResponse, TextPart, Usage
from turnkeep.telemetry.spans import (
    Attributes,
    SpanRecorder,
    capture_content,
    record_span,
    span,
)


def _usage(usage: Usage) -> dict[str, int | bool | None]:
    return {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
        "turnkeep.usage.estimated": True if usage.estimated else None,
    }


def _messages_json(messages: Sequence[Message]) -> str:
    """The conventions' message shape: role and text parts (tool calls and results by name)."""
    shaped = []
    for message in messages:
        parts: list[dict[str, str]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                parts.append({"type": "text", "content": part.text})
            else:
                parts.append({"type": type(part).__name__})
        shaped.append({"role": message.role, "parts": parts})
    return json.dumps(shaped, ensure_ascii=False)


def chat_span(
    trace_parent: str | None,
    *,
    session_id: str,
    op_id: str,
    round_: int,
    provider_name: str,
    model: str,
    request: ModelRequest,
) -> AbstractContextManager[SpanRecorder]:
    """The `chat {model}` span of one model round (a client span around the provider call)."""
    attributes: Attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name,
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": request.max_tokens,
        "gen_ai.conversation.id": session_id,
        "turnkeep.turn.id": op_id,
        "turnkeep.round": round_,
        "gen_ai.input.messages": _messages_json(request.messages) if capture_content() else None,
    }
    return span(f"chat {model}", trace_parent, attributes, kind="client")


def chat_done(recorder: SpanRecorder, response: ModelResponse) -> None:
    """The round's reply on its span: finish reason, response model, usage (and content)."""
    if not recorder.recording:
        return
    recorder.set(
        {
            "gen_ai.response.finish_reasons": [response.stop_reason],
            "gen_ai.response.model": response.model or None,
            **_usage(response.usage),
            "gen_ai.output.messages": (
                _messages_json([response.message]) if capture_content() else None
            ),
        }
    )


def tool_span(
    trace_parent: str | None,
    *,
    session_id: str,
    op_id: str,
    call_id: str,
    name: str,
    arguments: str,
) -> AbstractContextManager[SpanRecorder]:
    """The `execute_tool {name}` span of one tool call."""
    attributes: Attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": session_id,
        "turnkeep.turn.id": op_id,
        "gen_ai.tool.call.arguments": arguments if capture_content() else None,
    }
    return span(f"execute_tool {name}", trace_parent, attributes)


def tool_done(recorder: SpanRecorder, content: str, *, is_error: bool) -> None:
    """A tool call's outcome on its span (its result text only with content capture on)."""
    if not recorder.recording:
        return
    recorder.set({"gen_ai.tool.call.result": content if capture_content() else None})
    if is_error:
        recorder.fail("tool_error")


def compaction_span(
    trace_parent: str | None,
    *,
    op_id: str,
    round_: int,
    start: float,
    end: float,
    strategy: str,
    tokens_before: int,
    tokens_after: int,
    usage: Usage,
) -> None:
    """A finished context shrink (`compaction`: a model call; `window`: none) as a span."""
    record_span(
        f"{strategy} context",
        trace_parent,
        start=start,
        end=end,
        attributes={
            "turnkeep.turn.id": op_id,
            "turnkeep.round": round_,
            "turnkeep.context.strategy": strategy,
            "turnkeep.context.tokens_before": tokens_before,
            "turnkeep.context.tokens_after": tokens_after,
            **(_usage(usage) if strategy == "compaction" else {}),
        },
    )


def approval_span(
    trace_parent: str | None,
    *,
    op_id: str,
    call_id: str,
    name: str,
    requested_at: float,
    decided_at: float,
    decision: str,
) -> None:
    """The wait for a person's decision on one call, from its request to the decision."""
    record_span(
        f"approval_wait {name}",
        trace_parent,
        start=requested_at,
        end=decided_at,
        attributes={
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "turnkeep.turn.id": op_id,
            "turnkeep.approval.decision": decision,
        },
    )


def turn_span(
    trace_parent: str | None,
    *,
    session_id: str,
    op_id: str,
    agent_name: str,
    started_at: float,
    finished_at: float,
    status: str,
    rounds: int,
    usage: Usage,
) -> None:
    """The `invoke_agent {agent}` span of the whole turn, emitted once by its terminal step
    with the ids chosen at its start (so every step's span is its child)."""
    record_span(
        f"invoke_agent {agent_name}",
        trace_parent,
        start=started_at,
        end=finished_at,
        turn=True,
        error=None if status == "completed" else f"turn_{status}",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent_name,
            "gen_ai.conversation.id": session_id,
            "turnkeep.turn.id": op_id,
            "turnkeep.turn.status": status,
            "turnkeep.turn.rounds": rounds,
            **_usage(usage),
        },
    )
