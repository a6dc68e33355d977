"""The one model-provider interface: a provider-neutral transcript in, a stream of frames out.

Every provider (scripted, Bedrock Converse, OpenAI-compatible) speaks this interface, so the
harness never knows which model it drives. Tool-call arguments stay the raw JSON text the model
produced: parsing and schema validation belong to the harness, which turns bad arguments into a
tool error result the model sees.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from turnkeep.providers.context import SCRIPTED_CONTEXT, ContextWindow
from turnkeep.providers.settings import ModelSettings

# -- transcript ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A tool call as the model made it; `arguments` is the raw JSON text it streamed."""

    id: str
    name: str
    arguments: str
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    """The result of the tool call `call_id`; `is_error` marks a failed or rejected call."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"
    # Images a tool returned (MCP `image` content, image bytes from a function tool), sent to
    # the model inside the result where the provider takes them (docs/attachments.md).
    attachments: tuple[AttachmentPart, ...] = ()


@dataclass(frozen=True, slots=True)
class ReasoningPart:
    """The model's reasoning before its answer: kept in the transcript so a round can resume and
    (signed) sent back to the model, never shown as the reply or copied into working notes.

    `signature` is the provider's proof that the text is the model's own (Claude's signed
    thinking); `redacted` is reasoning the provider encrypted, base64 (sent back as it came).
    """

    text: str = ""
    signature: str = ""
    redacted: str = ""
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class AttachmentPart:
    """An image or document sent to the model with a message (docs/attachments.md).

    The transcript stores only the reference (`attachment_id`, name, media type, size); the
    harness loads `data` from the session's store when it builds a round's request, so a
    provider receives the checked bytes and never a URL to fetch, except the one case where
    the service reads the session's own object itself: `s3_uri` (with `bucket_owner`, the
    bucket's account when known) for a Bedrock model that takes `s3Location` sources
    (docs/attachments.md, "S3 sources"); `width` / `height` (0: unknown) then stand in for
    the image header the context budget reads.
    """

    attachment_id: str
    name: str
    media_type: str
    size: int = 0
    data: bytes = b""
    kind: Literal["attachment"] = "attachment"
    s3_uri: str = ""
    bucket_owner: str = ""
    width: int = 0
    height: int = 0

    @property
    def is_image(self) -> bool:
        """Whether the media type is an image (the rest are documents)."""
        return self.media_type.startswith("image/")


Part = TextPart | ToolCallPart | ToolResultPart | ReasoningPart | AttachmentPart
Role = Literal["user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class Message:
    """One transcript message. Tool results travel in `tool` messages (one per result batch)."""

    role: Role
    parts: tuple[Part, ...]

    @property
    def text(self) -> str:
        """Concatenated text parts (reasoning excluded)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """Tool calls of an assistant message, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool: name, description, JSON schema of its arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One model round. An empty `tools` means tools are off (the wrap-up round)."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    settings: ModelSettings | None = None
    """The agent's (and turn's) model settings; `max_tokens`/`temperature` above, set by the
    harness itself (e.g. a compaction's summary cap), take precedence over them."""

    def settings_over(self, base: ModelSettings) -> ModelSettings:
        """What this round asks for: `base` (a provider's spec options), the round's `settings`
        over it, then the harness's own `max_tokens` / `temperature` over those."""
        merged = base.merged(self.settings)
        harness = {
            name: value
            for name, value in (("max_tokens", self.max_tokens), ("temperature", self.temperature))
            if value is not None
        }
        return merged.model_copy(update=harness) if harness else merged


# -- stream -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one model round, or summed over rounds (`+`): the one usage record of
    providers, turn state and the API."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    estimated: bool = False
    """True when the server reported no usage and the counts are the provider's estimate
    (characters / 4), so they are never mistaken for a measured zero (docs/providers.md)."""
    cost_micros: int = 0
    """What the tokens cost in integer micro-dollars; providers leave it 0 and the harness
    prices the round (docs/usage.md)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.estimated or other.estimated,
            self.cost_micros + other.cost_micros,
        )


StopReason = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "content_filtered",
    "guardrail_intervened",
]


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The settled assistant message of a round, with usage and why the model stopped."""

    message: Message
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)
    model: str = ""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """The model began tool call number `index` (0-based within the round)."""

    index: int
    id: str
    name: str
    kind: Literal["tool_call_start"] = "tool_call_start"


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """More raw argument JSON text for tool call `index`."""

    index: int
    arguments: str
    kind: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of reasoning block `index` (0-based within the round): text, or the block's
    signature / redacted content when it arrives. Its own kind: never part of the reply."""

    index: int
    text: str = ""
    signature: str = ""
    redacted: str = ""
    kind: Literal["reasoning_delta"] = "reasoning_delta"


@dataclass(frozen=True, slots=True)
class ResponseDone:
    """The last event of every successful stream."""

    response: ModelResponse
    kind: Literal["done"] = "done"


StreamEvent = TextDelta | ToolCallStart | ToolCallDelta | ReasoningDelta | ResponseDone


# -- errors -------------------------------------------------------------------------------------


class ModelError(Exception):
    """A model round failed. `retryable` says whether the same request may succeed later."""

    retryable = False

    def __init__(self, message: str, *, code: str = "model_error") -> None:
        super().__init__(message)
        self.code = code


class RetryableModelError(ModelError):
    """Throttling, 5xx, timeouts, dropped connections: the step's retry policy may try again."""

    retryable = True


class FatalModelError(ModelError):
    """Validation, auth, context length, bad configuration: retrying cannot help."""

    retryable = False


class TranscriptError(FatalModelError):
    """The transcript breaks a provider-boundary invariant (e.g. a tool call without a result)."""


def check_transcript(messages: Sequence[Message]) -> None:
    """Raise TranscriptError unless every tool call is answered by exactly one later result."""
    pending: dict[str, str] = {}
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                if message.role != "assistant":
                    raise TranscriptError(
                        f"message #{index}: tool call {part.id!r} outside an assistant message"
                    )
                if part.id in pending:
                    raise TranscriptError(f"message #{index}: duplicate tool call id {part.id!r}")
                pending[part.id] = part.name
            elif isinstance(part, ToolResultPart):
                if part.call_id not in pending:
                    raise TranscriptError(
                        f"message #{index}: tool result for unknown or already answered call "
                        f"{part.call_id!r}"
                    )
                del pending[part.call_id]
        if message.role == "user" and pending:
            raise TranscriptError(
                f"message #{index}: tool calls without results: {sorted(pending)}"
            )
    if pending:
        raise TranscriptError(f"tool calls without results: {sorted(pending)}")


# -- provider -----------------------------------------------------------------------------------


class ModelProvider(ABC):
    """A model behind the one streaming interface."""

    name: str = "provider"
    context: ContextWindow = SCRIPTED_CONTEXT
    """The model's context window; `provider_from_config` sets it from the spec's `context=` and
    `reserve=` options or the family default (docs/providers.md)."""

    def s3_source_region(self) -> str | None:
        """The region whose S3 objects this model reads itself (Bedrock `s3Location` sources,
        docs/attachments.md "S3 sources"), or None: it is sent attachments' bytes."""
        return None

    @abstractmethod
    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Stream one round; the last event is ResponseDone. Raises ModelError on failure."""

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Run one round to completion (drains the stream)."""
        for event in self.stream(request):
            if isinstance(event, ResponseDone):
                return event.response
        raise RetryableModelError(
            f"{self.name}: stream ended without a final response", code="stream_truncated"
        )
