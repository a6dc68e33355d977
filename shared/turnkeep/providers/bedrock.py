"""Amazon Bedrock Converse / ConverseStream behind the one streaming provider interface.

The transcript is mapped to Converse messages (tool results become `toolResult` blocks of a user
message, consecutive same-role messages are merged), tool specs become `toolSpec`s with the JSON
schema of their pydantic argument models, and the streamed blocks are reassembled into the
neutral events. Errors are classified (throttling/5xx/timeouts retryable, validation/auth/
context length fatal) and never retried here: the step's retry policy owns retries.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

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

from turnkeep.providers.assembly import StreamAssembler, arguments_object
from turnkeep.providers.base import (
    FatalModelError,
    Message,
    ModelError,
    ModelProvider,
    ModelRequest,
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

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient
    from mypy_boto3_bedrock_runtime.type_defs import (
        ContentBlockTypeDef,
        ConverseStreamOutputTypeDef,
        InferenceConfigurationTypeDef,
        MessageTypeDef,
        SystemContentBlockTypeDef,
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
_CONTEXT_LENGTH = re.compile(
    r"too long|context (length|window)|too many (input )?tokens|maximum (input )?tokens",
    re.IGNORECASE,
)
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "content_filtered": "content_filtered",
    "guardrail_intervened": "content_filtered",
    # The model ran out of context while generating: its output is cut off like max_tokens.
    "model_context_window_exceeded": "max_tokens",
}
_NO_OUTPUT = "(no output)"


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
    ) -> None:
        if not model_id or model_id != model_id.strip():
            raise ValueError(f"bedrock model id must be non-empty without spaces: {model_id!r}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.model_id = model_id
        self.streaming = stream
        self.max_tokens = max_tokens
        self._region_name = region_name
        self._client = client

    @property
    def client(self) -> BedrockRuntimeClient:
        """The injected client, or the process-wide default client for the region."""
        if self._client is None:
            self._client = default_client(self._region_name)
        return self._client

    # -- request --------------------------------------------------------------------------------

    def converse_arguments(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `converse` / `converse_stream` for `request`."""
        check_transcript(request.messages)
        tools_on = bool(request.tools)
        arguments: dict[str, Any] = {
            "modelId": self.model_id,
            "messages": converse_messages(request.messages, tools_on=tools_on),
            "inferenceConfig": _inference_config(request, self.max_tokens),
        }
        if request.system.strip():
            system: list[SystemContentBlockTypeDef] = [{"text": request.system}]
            arguments["system"] = system
        if tools_on:
            arguments["toolConfig"] = tool_configuration(request.tools)
        return arguments

    # -- rounds ---------------------------------------------------------------------------------

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Stream one round (ConverseStream, or Converse when streaming is off)."""
        arguments = self.converse_arguments(request)
        if self.streaming:
            yield from self._stream_round(arguments)
        else:
            yield from self._converse_round(arguments)

    def _stream_round(self, arguments: dict[str, Any]) -> Iterator[StreamEvent]:
        try:
            response = self.client.converse_stream(**arguments)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc) from exc
        assembler = StreamAssembler()
        stop: str | None = None
        usage = Usage()
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
            # reasoningContent / citation deltas have no place in the neutral transcript.

    def _converse_round(self, arguments: dict[str, Any]) -> Iterator[StreamEvent]:
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
        stop = self._stop_reason(response["stopReason"], assembler)
        yield assembler.finish(stop, _usage(response["usage"]), self.model_id)

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
            if kind == "invalid_request" and _CONTEXT_LENGTH.search(message):
                kind = "context_length"
            return FatalModelError(text, code=kind)
        if status is not None and (status == 429 or status >= 500):
            return RetryableModelError(text, code="unavailable")
        return FatalModelError(text, code="model_error")


_default_clients: dict[str | None, BedrockRuntimeClient] = {}
_default_clients_lock = threading.Lock()


def default_client(region_name: str | None = None) -> BedrockRuntimeClient:
    """A `bedrock-runtime` client from the boto3 credential chain, shared per process and region.

    boto3 clients are thread-safe and slow to build, and a provider may be built per round, so
    one client per region serves them all. SDK retries are off: retries belong to the step's
    retry policy, so a throttled round surfaces as RetryableModelError at once instead of
    sleeping inside the Lambda.
    """
    with _default_clients_lock:
        client = _default_clients.get(region_name)
        if client is None:
            import boto3
            from botocore.config import Config

            config = Config(
                retries={"total_max_attempts": 1, "mode": "standard"},
                read_timeout=DEFAULT_READ_TIMEOUT,
            )
            client = boto3.client("bedrock-runtime", region_name=region_name, config=config)
            _default_clients[region_name] = client
        return client


# -- mapping ------------------------------------------------------------------------------------


def converse_messages(messages: Sequence[Message], *, tools_on: bool) -> list[MessageTypeDef]:
    """Map the transcript to Converse messages: strict user/assistant alternation.

    `tool` messages become user messages of `toolResult` blocks; consecutive messages of the
    same Converse role are merged; blank text is dropped (Converse rejects blank blocks). With
    tools off, Converse rejects toolUse/toolResult blocks without a toolConfig, so earlier calls
    and results are rendered as text instead.
    """
    out: list[MessageTypeDef] = []
    for message in messages:
        role: str = "assistant" if message.role == "assistant" else "user"
        blocks = [block for part in message.parts for block in _blocks(part, tools_on=tools_on)]
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1] = {"role": out[-1]["role"], "content": [*out[-1]["content"], *blocks]}
        else:
            out.append({"role": "assistant" if role == "assistant" else "user", "content": blocks})
    return out


def _blocks(part: TextPart | ToolCallPart | ToolResultPart, *, tools_on: bool) -> list[Any]:
    if isinstance(part, TextPart):
        return [{"text": part.text}] if part.text.strip() else []
    if isinstance(part, ToolCallPart):
        if not tools_on:
            return [{"text": f"[called tool {part.name} (id {part.id}) with {part.arguments}]"}]
        block: ContentBlockTypeDef = {
            "toolUse": {"toolUseId": part.id, "name": part.name, "input": tool_input(part)}
        }
        return [block]
    content = part.content if part.content.strip() else _NO_OUTPUT
    if not tools_on:
        status = "error" if part.is_error else "ok"
        return [{"text": f"[result of tool {part.name} (id {part.call_id}), {status}]\n{content}"}]
    result: ContentBlockTypeDef = {
        "toolResult": {
            "toolUseId": part.call_id,
            "content": [{"text": content}],
            "status": "error" if part.is_error else "success",
        }
    }
    return [result]


def tool_input(call: ToolCallPart) -> dict[str, Any]:
    """The `toolUse.input` object for a stored call.

    Arguments that are not a JSON object (the model streamed garbage) are sent as `{}`: the
    harness already answered the call with a tool error saying so, which the model sees.
    """
    value = arguments_object(call.arguments)
    return {} if value is None else value


def tool_configuration(tools: Sequence[ToolSpec]) -> ToolConfigurationTypeDef:
    """Converse `toolConfig` for the given tool specs."""
    names = [tool.name for tool in tools]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise FatalModelError(f"duplicate tool names: {duplicates}", code="invalid_request")
    return {
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


def _inference_config(request: ModelRequest, default_max: int) -> InferenceConfigurationTypeDef:
    config: InferenceConfigurationTypeDef = {"maxTokens": request.max_tokens or default_max}
    if request.temperature is not None:
        config["temperature"] = request.temperature
    return config


def _usage(usage: TokenUsageTypeDef) -> Usage:
    return Usage(
        input_tokens=usage.get("inputTokens", 0),
        output_tokens=usage.get("outputTokens", 0),
        cache_read_tokens=usage.get("cacheReadInputTokens", 0),
        cache_write_tokens=usage.get("cacheWriteInputTokens", 0),
    )
