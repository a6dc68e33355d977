"""Amazon Bedrock Converse / ConverseStream behind the one streaming provider interface.

The transcript is mapped to Converse messages (tool results become `toolResult` blocks of a user
message, consecutive same-role messages are merged), tool specs become `toolSpec`s with the JSON
schema of their pydantic argument models, model settings become `inferenceConfig`,
`toolConfig.toolChoice`, `guardrailConfig`, `additionalModelRequestFields` and cache points, and
the streamed blocks (text, tool use, reasoning) are reassembled into the neutral events. Errors
are classified (throttling/5xx/timeouts retryable, validation/auth/context length fatal) and never
retried here: the step's retry policy owns retries. What differs per model family (tool-result
status, text beside tool results, cache points, signed reasoning) is in docs/providers.md.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from botocore.eventstream import ParserError as EventStreamParserError
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ReadTimeoutError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from urllib3.exceptions import HTTPError as URLLib3HTTPError
from urllib3.exceptions import TimeoutError as URLLib3TimeoutError

from turnkeep.providers.assembly import StreamAssembler, arguments_object, estimated_usage
from turnkeep.providers.base import (
    AttachmentPart,
    FatalModelError,
    Message,
    ModelError,
    ModelProvider,
    ModelRequest,
    Part,
    ReasoningPart,
    RetryableModelError,
    StopReason,
    StreamEvent,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
    check_transcript,
)
from turnkeep.providers.capabilities import capabilities_for
from turnkeep.providers.settings import ModelSettings
from turnkeep.providers.wire_attachments import converse_block, omitted_text, unique_document_names

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient
    from mypy_boto3_bedrock_runtime.type_defs import (
        ContentBlockTypeDef,
        ConverseStreamOutputTypeDef,
        InferenceConfigurationTypeDef,
        MessageTypeDef,
        TokenUsageTypeDef,
        ToolConfigurationTypeDef,
    )

DEFAULT_MAX_TOKENS = 4096
DEFAULT_READ_TIMEOUT = 120.0

# Error codes compared case-insensitively: in-stream exception events use camelCase names
# (`throttlingException`), HTTP errors use PascalCase (`ThrottlingException`).
_RETRYABLE_CODES: dict[str, str] = {
    "throttlingexception": "throttled",
    "toomanyrequestsexception": "throttled",
    "serviceunavailableexception": "unavailable",
    "internalserverexception": "unavailable",
    "modelnotreadyexception": "unavailable",
    "modeltimeoutexception": "timeout",
    "modelstreamerrorexception": "stream_error",
    "requesttimeout": "timeout",
    "requesttimeoutexception": "timeout",
}
_FATAL_CODES: dict[str, str] = {
    "validationexception": "invalid_request",
    "accessdeniedexception": "auth",
    "unrecognizedclientexception": "auth",
    "expiredtokenexception": "auth",
    "invalidsignatureexception": "auth",
    "missingauthenticationtokenexception": "auth",
    "resourcenotfoundexception": "not_found",
    "modelerrorexception": "model_error",
    "servicequotaexceededexception": "quota",
}
# ValidationException messages that say the input does not fit the model's context (the table
# in docs/providers.md gives each one's source). An output limit above the model's ("The maximum
# tokens you requested exceeds the model limit of 4096") is not one: shrinking the input cannot
# help, so it stays `invalid_request`.
_CONTEXT_LENGTH = re.compile(
    r"too long|context (length|window|limit)|too many (input )?tokens|too many total text bytes"
    r"|input tokens exceed|maximum (input|context) (tokens|length)|exceed context limit",
    re.IGNORECASE,
)
_NO_STREAMED_TOOL_USE = re.compile(r"doesn't support tool use in streaming mode", re.IGNORECASE)
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "content_filtered": "content_filtered",
    "guardrail_intervened": "guardrail_intervened",
    # The model ran out of context while generating: its output is cut off like max_tokens.
    "model_context_window_exceeded": "max_tokens",
}
_NO_OUTPUT = "(no output)"
# Between tool results and user text for families that refuse both in one user message.
_BRIDGE_TEXT = "(tool results received)"
_CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}
# Families whose Converse API takes `toolResult.status` and text blocks beside tool results
# (the service model: status is "only supported by Amazon Nova and Anthropic Claude 3 and 4").
_RICH_TOOL_RESULTS = re.compile(r"anthropic\.claude|amazon\.nova", re.IGNORECASE)
# Models with Bedrock prompt caching (cache points in system, messages; tools: Claude only).
_CACHING_CLAUDE = re.compile(
    r"anthropic\.claude-(3-5-haiku|3-5-sonnet-20241022|3-7|(opus|sonnet|haiku)-[4-9]|[4-9])",
    re.IGNORECASE,
)
_CACHING_NOVA = re.compile(r"amazon\.nova", re.IGNORECASE)
_CLAUDE = re.compile(r"anthropic\.claude", re.IGNORECASE)
# Model ids that answered "doesn't support tool use in streaming mode": later rounds with tools
# go straight to Converse (process-wide, like the default clients).
_CONVERSE_FOR_TOOLS: set[str] = set()


class BedrockProvider(ModelProvider):
    """A Bedrock model (`model_id`: model id, inference profile id or ARN) via Converse."""

    name = "bedrock"

    def __init__(
        self,
        model_id: str,
        client: BedrockRuntimeClient | None = None,
        *,
        stream: bool = True,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        region_name: str | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        if not model_id or model_id != model_id.strip():
            raise ValueError(f"bedrock model id must be non-empty without spaces: {model_id!r}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.model_id = model_id
        self.streaming = stream
        self._region_name = region_name
        self._client = client
        base = settings or ModelSettings()
        # One max_tokens: the settings' (docs/providers.md); `max_tokens` is its default here,
        # since Converse needs a number.
        self.settings = (
            base
            if base.max_tokens is not None
            else base.model_copy(update={"max_tokens": max_tokens})
        )
        """The spec's settings; a request's `settings` override them field by field."""

    @property
    def client(self) -> BedrockRuntimeClient:
        """The injected client, or the process-wide default client for the region."""
        if self._client is None:
            self._client = default_client(self._region_name)
        return self._client

    def s3_source_region(self) -> str | None:
        """The client's region where the model family takes `s3Location` sources (the
        capability table; Bedrock reads only objects of buckets in the request's region)."""
        if not capabilities_for(f"bedrock:{self.model_id}").s3_location:
            return None
        return self.client.meta.region_name or None

    # -- request --------------------------------------------------------------------------------

    def converse_arguments(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `converse` / `converse_stream` for `request`."""
        check_transcript(request.messages)
        settings = request.settings_over(self.settings)
        tools_on = bool(request.tools) and settings.tool_choice != "none"
        rich = bool(_RICH_TOOL_RESULTS.search(self.model_id))
        messages = converse_messages(
            request.messages,
            tools_on=tools_on,
            tool_status=rich,
            text_beside_results=rich,
            signed_reasoning=bool(_CLAUDE.search(self.model_id)),
        )
        caching = self._caching(settings)
        if caching and messages:
            last = messages[-1]
            messages[-1] = {
                "role": last["role"],
                "content": [*last["content"], {"cachePoint": {"type": "default"}}],
            }
        arguments: dict[str, Any] = {
            "modelId": self.model_id,
            "messages": messages,
            "inferenceConfig": self._inference_config(settings),
        }
        if request.system.strip():
            system: list[Any] = [{"text": request.system}]
            if caching:
                system.append(_CACHE_POINT)
            arguments["system"] = system
        if tools_on:
            config: Any = tool_configuration(request.tools, settings.tool_choice)
            if caching and _CACHING_CLAUDE.search(self.model_id):
                config["tools"] = [*config["tools"], _CACHE_POINT]
            arguments["toolConfig"] = config
        if settings.guardrail is not None:
            arguments["guardrailConfig"] = {
                "guardrailIdentifier": settings.guardrail.identifier,
                "guardrailVersion": settings.guardrail.version,
                "trace": "enabled" if settings.guardrail.trace else "disabled",
            }
        fields = self._additional_fields(settings)
        if fields:
            arguments["additionalModelRequestFields"] = fields
        return arguments

    def _caching(self, settings: ModelSettings) -> bool:
        if settings.prompt_cache is not None:
            return settings.prompt_cache
        return bool(_CACHING_CLAUDE.search(self.model_id) or _CACHING_NOVA.search(self.model_id))

    def _inference_config(self, settings: ModelSettings) -> InferenceConfigurationTypeDef:
        config: InferenceConfigurationTypeDef = {
            "maxTokens": settings.max_tokens or DEFAULT_MAX_TOKENS
        }
        if settings.temperature is not None:
            config["temperature"] = settings.temperature
        if settings.top_p is not None:
            config["topP"] = settings.top_p
        if settings.stop:
            config["stopSequences"] = list(settings.stop)
        return config

    def _additional_fields(self, settings: ModelSettings) -> dict[str, Any]:
        fields = dict(settings.extra or {})
        if settings.reasoning_budget is not None:
            if not _CLAUDE.search(self.model_id):
                raise FatalModelError(
                    f"bedrock {self.model_id}: reasoning_budget is only mapped for Anthropic "
                    "Claude (thinking.budget_tokens); pass this model's own field in `extra`",
                    code="configuration",
                )
            fields["thinking"] = {"type": "enabled", "budget_tokens": settings.reasoning_budget}
        return fields

    # -- rounds ---------------------------------------------------------------------------------

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Stream one round: ConverseStream, or Converse when streaming is off or the model
        cannot stream tool use (learnt from its first refusal, then remembered)."""
        arguments = self.converse_arguments(request)
        tools = "toolConfig" in arguments
        if not self.streaming or (tools and self.model_id in _CONVERSE_FOR_TOOLS):
            yield from self._converse_round(arguments, request)
            return
        try:
            yield from self._stream_round(arguments, request)
        except FatalModelError as exc:
            # Raised by the ConverseStream call itself, before any event: nothing was yielded.
            refused = exc.code == "invalid_request" and _NO_STREAMED_TOOL_USE.search(str(exc))
            if not (tools and refused):
                raise
            _CONVERSE_FOR_TOOLS.add(self.model_id)
            yield from self._converse_round(arguments, request)

    def _stream_round(
        self, arguments: dict[str, Any], request: ModelRequest
    ) -> Iterator[StreamEvent]:
        try:
            response = self.client.converse_stream(**arguments)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc) from exc
        assembler = StreamAssembler()
        stop: str | None = None
        usage: Usage | None = None
        events = response["stream"]
        try:
            for event in events:
                yield from self._stream_event(event, assembler)
                if "messageStop" in event:
                    stop = event["messageStop"]["stopReason"]
                if "metadata" in event:
                    usage = _usage(event["metadata"]["usage"])
        except (ClientError, BotoCoreError, URLLib3HTTPError, EventStreamParserError) as exc:
            # botocore hands the raw urllib3 response to its EventStream, so a connection that
            # drops or times out mid-stream raises urllib3's errors, not botocore's.
            raise self._error(exc) from exc
        finally:
            # Also when the consumer abandons the round: release the HTTP connection now.
            events.close()
        if stop is None:
            raise RetryableModelError(
                f"bedrock {self.model_id}: stream ended without messageStop",
                code="stream_truncated",
            )
        if usage is None:
            usage = estimated_usage(request, assembler.message())
        yield assembler.finish(self._stop_reason(stop, assembler), usage, self.model_id)

    def _stream_event(
        self, event: ConverseStreamOutputTypeDef, assembler: StreamAssembler
    ) -> Iterator[StreamEvent]:
        for key, payload in event.items():
            if key.lower() in _RETRYABLE_CODES or key.lower() in _FATAL_CODES:
                # botocore raises in-stream exceptions as EventStreamError; a plain event dict
                # carrying one (other transports, stubs) is classified the same way.
                message = str(payload.get("message", "")) if isinstance(payload, dict) else ""
                raise self._classified(key, message, status=None)
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            tool_use = start["start"].get("toolUse")
            if tool_use is not None:
                if assembler.has_call(start["contentBlockIndex"]):
                    raise RetryableModelError(
                        f"bedrock {self.model_id}: block {start['contentBlockIndex']} "
                        "started twice",
                        code="protocol_error",
                    )
                yield assembler.start_tool_call(
                    start["contentBlockIndex"], tool_use["toolUseId"], tool_use["name"]
                )
        elif "contentBlockDelta" in event:
            block = event["contentBlockDelta"]
            delta = block["delta"]
            if "text" in delta:
                text = assembler.text(delta["text"])
                if text is not None:
                    yield text
            elif "toolUse" in delta:
                index = block["contentBlockIndex"]
                if not assembler.has_call(index):
                    raise RetryableModelError(
                        f"bedrock {self.model_id}: toolUse delta for block {index} "
                        "without contentBlockStart",
                        code="protocol_error",
                    )
                piece = assembler.tool_arguments(index, delta["toolUse"]["input"])
                if piece is not None:
                    yield piece
            elif "reasoningContent" in delta:
                reasoning = delta["reasoningContent"]
                redacted = reasoning.get("redactedContent")
                thought = assembler.reasoning(
                    ("reasoning", block["contentBlockIndex"]),
                    text=reasoning.get("text", ""),
                    signature=reasoning.get("signature", ""),
                    redacted=base64.b64encode(redacted).decode() if redacted else "",
                )
                if thought is not None:
                    yield thought
            # citation deltas have no place in the neutral transcript.

    def _converse_round(
        self, arguments: dict[str, Any], request: ModelRequest
    ) -> Iterator[StreamEvent]:
        try:
            response = self.client.converse(**arguments)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc) from exc
        assembler = StreamAssembler()
        message = response["output"].get("message")
        for index, block in enumerate(message["content"] if message else []):
            if "text" in block:
                text = assembler.text(block["text"])
                if text is not None:
                    yield text
            elif "toolUse" in block:
                tool_use = block["toolUse"]
                yield assembler.start_tool_call(index, tool_use["toolUseId"], tool_use["name"])
                piece = assembler.tool_arguments(
                    index, json.dumps(tool_use["input"], ensure_ascii=False)
                )
                if piece is not None:
                    yield piece
            elif "reasoningContent" in block:
                reasoning = block["reasoningContent"]
                signed = reasoning.get("reasoningText", {})
                redacted = reasoning.get("redactedContent")
                thought = assembler.reasoning(
                    ("reasoning", index),
                    text=signed.get("text", ""),
                    signature=signed.get("signature", ""),
                    redacted=base64.b64encode(redacted).decode() if redacted else "",
                )
                if thought is not None:
                    yield thought
        stop = self._stop_reason(response["stopReason"], assembler)
        reported = response.get("usage")
        usage = _usage(reported) if reported else estimated_usage(request, assembler.message())
        yield assembler.finish(stop, usage, self.model_id)

    # -- classification -------------------------------------------------------------------------

    def _stop_reason(self, stop: str, assembler: StreamAssembler) -> StopReason:
        mapped = _STOP_REASONS.get(stop)
        if mapped is not None:
            return mapped
        if stop == "malformed_tool_use" and assembler.tool_call_count:
            # The calls reach the harness, which answers bad arguments with a tool error.
            return "tool_use"
        # malformed_model_output, malformed_tool_use without a call, or a reason this code
        # does not know: sampling again may succeed, and nothing usable was settled.
        raise RetryableModelError(
            f"bedrock {self.model_id}: model stopped with {stop!r}", code="malformed_output"
        )

    def _error(self, exc: Exception) -> ModelError:
        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return self._classified(
                str(error.get("Code", "")), str(error.get("Message", "")), status=status
            )
        prefix = f"bedrock {self.model_id}"
        if isinstance(exc, ReadTimeoutError | ConnectTimeoutError | URLLib3TimeoutError):
            return RetryableModelError(f"{prefix}: timed out: {exc}", code="timeout")
        if isinstance(
            exc, HTTPClientError | EndpointConnectionError | BotoConnectionError | URLLib3HTTPError
        ):
            return RetryableModelError(f"{prefix}: connection failed: {exc}", code="connection")
        if isinstance(exc, EventStreamParserError):
            return RetryableModelError(
                f"{prefix}: corrupt event stream: {type(exc).__name__}: {exc}",
                code="protocol_error",
            )
        if isinstance(exc, NoCredentialsError | PartialCredentialsError):
            return FatalModelError(f"{prefix}: no usable AWS credentials: {exc}", code="auth")
        if isinstance(exc, NoRegionError):
            return FatalModelError(f"{prefix}: no AWS region configured", code="configuration")
        return FatalModelError(f"{prefix}: {type(exc).__name__}: {exc}", code="invalid_request")

    def _classified(self, code: str, message: str, *, status: int | None) -> ModelError:
        text = f"bedrock {self.model_id}: {code}: {message}".rstrip(": ")
        key = code.lower()
        if key in _RETRYABLE_CODES:
            return RetryableModelError(text, code=_RETRYABLE_CODES[key])
        if key in _FATAL_CODES:
            kind = _FATAL_CODES[key]
            # "The model returned the following errors: ..." (a model's own validation, relayed
            # as ValidationException or ModelErrorException) may be a context overflow too.
            if kind in ("invalid_request", "model_error") and _CONTEXT_LENGTH.search(message):
                kind = "context_length"
            return FatalModelError(text, code=kind)
        if status is not None and (status == 429 or status >= 500):
            return RetryableModelError(text, code="unavailable")
        return FatalModelError(text, code="model_error")


def default_client(region_name: str | None = None) -> BedrockRuntimeClient:
    """A `bedrock-runtime` client from the boto3 credential chain, shared per process and region
    (the process's client cache, `turnkeep.plumbing.clients`).

    Clients are thread-safe and slow to build, and a provider may be built per round, so one
    client per region serves them all. SDK retries are off: retries belong to the step's retry
    policy, so a throttled round surfaces as RetryableModelError at once instead of sleeping
    inside the Lambda.
    """
    from botocore.config import Config

    from turnkeep.plumbing.clients import shared_client

    if region_name is None and not os.environ.get("AWS_DEFAULT_REGION"):
        # botocore reads only AWS_DEFAULT_REGION; Lambda sets both, a laptop often AWS_REGION.
        region_name = os.environ.get("AWS_REGION") or None
    config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=DEFAULT_READ_TIMEOUT
    )
    client: BedrockRuntimeClient = shared_client(
        "bedrock-runtime", region_name or "", config=("bedrock-one-attempt", config)
    )
    return client


# -- mapping ------------------------------------------------------------------------------------


def converse_messages(
    messages: Sequence[Message],
    *,
    tools_on: bool,
    tool_status: bool = True,
    text_beside_results: bool = True,
    signed_reasoning: bool = False,
) -> list[MessageTypeDef]:
    """Map the transcript to Converse messages: strict user/assistant alternation.

    `tool` messages become user messages of `toolResult` blocks; consecutive messages of the
    same Converse role are merged; blank text is dropped (Converse rejects blank blocks). With
    tools off, Converse rejects toolUse/toolResult blocks without a toolConfig, so earlier calls
    and results are rendered as text instead. `tool_status`: send `toolResult.status` (else an
    error result's text says so); `text_beside_results`: user text may join the user message of
    tool results (else a short assistant message separates them); `signed_reasoning`: send
    signed or redacted reasoning back as `reasoningContent` (Claude), else reasoning is left out.
    """
    out: list[MessageTypeDef] = []
    for message in messages:
        role: str = "assistant" if message.role == "assistant" else "user"
        blocks = [
            block
            for part in message.parts
            for block in _blocks(
                part,
                tools_on=tools_on,
                tool_status=tool_status,
                signed_reasoning=signed_reasoning and tools_on,
                tool_images=tool_status,
            )
        ]
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            previous = list(out[-1]["content"])
            if not text_beside_results and role == "user" and _mixes(previous, blocks):
                out.append({"role": "assistant", "content": [{"text": _BRIDGE_TEXT}]})
                out.append({"role": "user", "content": blocks})
                continue
            out[-1] = {"role": out[-1]["role"], "content": [*previous, *blocks]}
        else:
            out.append({"role": "assistant" if role == "assistant" else "user", "content": blocks})
    unique_document_names(cast(list[dict[str, Any]], out))
    return out


def _mixes(previous: Sequence[Any], blocks: Sequence[Any]) -> bool:
    """Whether merging would put text and toolResult blocks in one user message."""
    kinds = {next(iter(block)) for block in [*previous, *blocks]}
    return "toolResult" in kinds and "text" in kinds


def _blocks(
    part: Part,
    *,
    tools_on: bool,
    tool_status: bool = True,
    signed_reasoning: bool = False,
    tool_images: bool = True,
) -> list[Any]:
    if isinstance(part, TextPart):
        return [{"text": part.text}] if part.text.strip() else []
    if isinstance(part, ReasoningPart):
        return _reasoning_blocks(part) if signed_reasoning else []
    if isinstance(part, ToolCallPart):
        if not tools_on:
            return [{"text": f"[called tool {part.name} (id {part.id}) with {part.arguments}]"}]
        block: ContentBlockTypeDef = {
            "toolUse": {"toolUseId": part.id, "name": part.name, "input": tool_input(part)}
        }
        return [block]
    if isinstance(part, AttachmentPart):
        return [converse_block(part)]
    content = part.content if part.content.strip() else _NO_OUTPUT
    if not tools_on:
        status = "error" if part.is_error else "ok"
        text = f"[result of tool {part.name} (id {part.call_id}), {status}]\n{content}"
        return [{"text": text}, *_tool_images(part, tool_images)]
    if tool_status and part.is_error:
        first: dict[str, Any] = {"text": content}
    else:
        # Without a status field the model learns of the failure from the text.
        first = {"text": f"[tool error] {content}" if part.is_error else content}
    result: dict[str, Any] = {
        "toolUseId": part.call_id,
        "content": [first, *_tool_images(part, tool_images)],
    }
    if tool_status:
        result["status"] = "error" if part.is_error else "success"
    return [{"toolResult": result}]


def _tool_images(part: ToolResultPart, tool_images: bool) -> list[Any]:
    """Images a tool returned: image blocks where the model takes them in a tool result (Nova,
    Claude 3 and 4, per the service model), else a text note (docs/attachments.md)."""
    if tool_images:
        return [converse_block(a) for a in part.attachments]
    why = "returned by the tool; this model cannot see images in tool results"
    return [{"text": omitted_text(a, why)} for a in part.attachments]


def _reasoning_blocks(part: ReasoningPart) -> list[Any]:
    """Claude's reasoning as it came: signed text, or redacted content; unsigned is dropped."""
    if part.redacted:
        return [{"reasoningContent": {"redactedContent": base64.b64decode(part.redacted)}}]
    if part.signature:
        text = {"text": part.text, "signature": part.signature}
        return [{"reasoningContent": {"reasoningText": text}}]
    return []


def tool_input(call: ToolCallPart) -> dict[str, Any]:
    """The `toolUse.input` object for a stored call.

    Arguments that are not a JSON object (the model streamed garbage) are sent as `{}`: the
    harness already answered the call with a tool error saying so, which the model sees.
    """
    value = arguments_object(call.arguments)
    return {} if value is None else value


def tool_configuration(
    tools: Sequence[ToolSpec], tool_choice: str | None = None
) -> ToolConfigurationTypeDef:
    """Converse `toolConfig` for the given tool specs and tool choice ('auto', 'required' /
    'any', or a tool's name; None = the model's default)."""
    names = [tool.name for tool in tools]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise FatalModelError(f"duplicate tool names: {duplicates}", code="invalid_request")
    config: ToolConfigurationTypeDef = {
        "tools": [
            {
                "toolSpec": {
                    "name": tool.name,
                    "description": tool.description or tool.name,
                    "inputSchema": {"json": tool.input_schema},
                }
            }
            for tool in tools
        ]
    }
    if tool_choice in (None, "none"):
        return config
    if tool_choice == "auto":
        config["toolChoice"] = {"auto": {}}
    elif tool_choice in ("required", "any"):
        config["toolChoice"] = {"any": {}}
    elif tool_choice in names:
        config["toolChoice"] = {"tool": {"name": tool_choice}}
    else:
        raise FatalModelError(
            f"tool_choice {tool_choice!r} names no tool of this round (tools: {sorted(names)})",
            code="configuration",
        )
    return config


def _usage(usage: TokenUsageTypeDef) -> Usage:
    return Usage(
        input_tokens=usage.get("inputTokens", 0),
        output_tokens=usage.get("outputTokens", 0),
        cache_read_tokens=usage.get("cacheReadInputTokens", 0),
        cache_write_tokens=usage.get("cacheWriteInputTokens", 0),
    )
