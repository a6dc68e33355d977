"""Reassembles a provider's streamed pieces into the neutral stream events and a settled message.

Shared by the Bedrock and OpenAI-compatible providers: each feeds text pieces and tool-call
pieces keyed by its own block/index numbering; the assembler numbers tool calls 0.. in order of
appearance, keeps the settled parts in that order (adjacent text merged), and never parses the
argument text (the harness validates it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from turnkeep.providers.attachment_budget import CHARS_PER_TOKEN, attachment_tokens
from turnkeep.providers.base import (
    AttachmentPart,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    ReasoningDelta,
    ReasoningPart,
    ResponseDone,
    StopReason,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolCallStart,
    Usage,
)


def arguments_object(arguments: str) -> dict[str, Any] | None:
    """The JSON object a stored call's argument text encodes, or None when it is not one.

    Sending a transcript back, providers replace argument text that is not a JSON object (the
    model streamed garbage; the harness already answered the call with a tool error saying so)
    by an empty object: Converse needs an object, and Ollama/vLLM parse the text and reject the
    whole request otherwise.
    """
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclass(slots=True)
class _PendingReasoning:
    index: int
    pieces: list[str] = field(default_factory=list)
    signature: str = ""
    redacted: str = ""


@dataclass(slots=True)
class _PendingCall:
    index: int
    id: str
    name: str
    pieces: list[str] = field(default_factory=list)


class StreamAssembler:
    """Collects one round's deltas; `finish` returns the final ResponseDone."""

    def __init__(self) -> None:
        # Order of appearance: text runs (as lists of pieces) and tool calls interleaved.
        self._order: list[list[str] | _PendingCall | _PendingReasoning] = []
        self._calls: dict[object, _PendingCall] = {}
        self._reasoning: dict[object, _PendingReasoning] = {}

    @property
    def tool_call_count(self) -> int:
        """How many tool calls have started so far."""
        return len(self._calls)

    def has_call(self, key: object) -> bool:
        """Whether a tool call was started under the provider's `key`."""
        return key in self._calls

    def text(self, piece: str) -> TextDelta | None:
        """Record a text piece; None for an empty piece (nothing to stream)."""
        if not piece:
            return None
        last = self._order[-1] if self._order else None
        if isinstance(last, list):
            last.append(piece)
        else:
            self._order.append([piece])
        return TextDelta(piece)

    def reasoning(
        self, key: object, *, text: str = "", signature: str = "", redacted: str = ""
    ) -> ReasoningDelta | None:
        """Record a piece of the reasoning block `key`; None when the piece is empty."""
        if not (text or signature or redacted):
            return None
        block = self._reasoning.get(key)
        if block is None:
            block = self._reasoning[key] = _PendingReasoning(len(self._reasoning))
            self._order.append(block)
        if text:
            block.pieces.append(text)
        if signature:
            block.signature += signature
        if redacted:
            block.redacted += redacted
        return ReasoningDelta(block.index, text, signature, redacted)

    def start_tool_call(self, key: object, call_id: str, name: str) -> ToolCallStart:
        """Begin the tool call the provider identifies by `key` (its block or index number)."""
        if key in self._calls:
            raise ValueError(f"tool call {key!r} started twice")
        call = _PendingCall(len(self._calls), call_id, name)
        self._calls[key] = call
        self._order.append(call)
        return ToolCallStart(call.index, call_id, name)

    def tool_arguments(self, key: object, piece: str) -> ToolCallDelta | None:
        """Append raw argument text to the call `key`; None for an empty piece."""
        call = self._calls[key]
        if not piece:
            return None
        call.pieces.append(piece)
        return ToolCallDelta(call.index, piece)

    def message(self) -> Message:
        """The assistant message assembled so far."""
        parts: list[Part] = []
        for item in self._order:
            if isinstance(item, list):
                parts.append(TextPart("".join(item)))
            elif isinstance(item, _PendingReasoning):
                parts.append(ReasoningPart("".join(item.pieces), item.signature, item.redacted))
            else:
                arguments = "".join(item.pieces)
                # A tool without parameters streams no argument text at all; "{}" is what the
                # model meant, and an empty string would fail JSON parsing in the harness.
                if not arguments.strip():
                    arguments = "{}"
                parts.append(ToolCallPart(item.id, item.name, arguments))
        return Message("assistant", tuple(parts))

    def finish(self, stop_reason: StopReason, usage: Usage, model: str) -> ResponseDone:
        """The final event of the round."""
        return ResponseDone(ModelResponse(self.message(), stop_reason, usage, model))


def estimated_usage(request: ModelRequest, message: Message) -> Usage:
    """Usage for a server that reported none: characters / 4 of the request (system prompt,
    tool specs, messages) and of the reply, marked `estimated` (docs/providers.md, "Usage")."""
    sent = len(request.system) + sum(
        len(tool.name) + len(tool.description) + len(json.dumps(tool.input_schema))
        for tool in request.tools
    )
    sent += sum(_part_chars(part) for m in request.messages for part in m.parts)
    received = sum(_part_chars(part) for part in message.parts)
    return Usage(-(-sent // 4), -(-received // 4), estimated=True)


def _part_chars(part: Part) -> int:
    if isinstance(part, TextPart | ReasoningPart):
        return len(part.text)
    if isinstance(part, ToolCallPart):
        return len(part.name) + len(part.arguments)
    if isinstance(part, AttachmentPart):
        return attachment_tokens(part) * CHARS_PER_TOKEN
    images = sum(attachment_tokens(a) for a in part.attachments) * CHARS_PER_TOKEN
    return len(part.name) + len(part.content) + images
