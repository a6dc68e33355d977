"""Any OpenAI-compatible Chat Completions endpoint (OpenAI, Ollama, vLLM, ...) over httpx.

One round is one POST `{base_url}/chat/completions` with `stream: true` (server-sent events,
usage requested from the final chunk; a server that sends none gets estimated usage). Streamed
`tool_calls` deltas are reassembled by index; the argument text is passed on raw (the harness
validates it); `reasoning_content` deltas (llama.cpp, vLLM, DeepSeek) become reasoning events.
Model settings map to `temperature`, `top_p`, `stop`, `max_tokens`, `tool_choice` and extra body
fields. Errors are classified and never retried here: 429/5xx/timeouts/dropped streams are
retryable, 4xx are fatal with the server's message.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from turnkeep.providers.assembly import StreamAssembler, arguments_object, estimated_usage
from turnkeep.providers.base import (
    AttachmentPart,
    FatalModelError,
    Message,
    ModelError,
    ModelProvider,
    ModelRequest,
    ReasoningDelta,
    ResponseDone,
    RetryableModelError,
    StopReason,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
    check_transcript,
)
from turnkeep.providers.capabilities import SCRIPTED, Capabilities, openai_capabilities
from turnkeep.providers.settings import ModelSettings
from turnkeep.providers.wire_attachments import chat_content_part, omitted_text

DEFAULT_TIMEOUT = 120.0
# Tool results carry no error flag in Chat Completions; the model learns of a failure from this
# prefix on the content.
TOOL_ERROR_PREFIX = "[tool error] "
_MAX_ERROR_TEXT = 2000

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filtered",
}
# Messages and error codes/types that mean "the prompt does not fit" (sources: the table in
# docs/providers.md): OpenAI `context_length_exceeded`, llama-server `exceed_context_size_error`
# ("... exceeds the available context size ..."), vLLM's "maximum context length", llama-cpp-
# python's "Requested tokens (N) exceed context window of M".
_CONTEXT_LENGTH = re.compile(
    r"context[_ ]length|context window|context size|maximum context|too many tokens"
    r"|prompt is too long",
    re.IGNORECASE,
)
_CONTEXT_CODES = ("context_length", "exceed_context_size")
# Body fields the provider owns; `extra` may not replace them.
_OWN_FIELDS = frozenset({"model", "messages", "stream", "stream_options", "tools"})


class OpenAICompatProvider(ModelProvider):
    """A model served by an OpenAI-compatible Chat Completions endpoint."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        client: httpx.Client | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        stream: bool = True,
        max_tokens: int | None = None,
        settings: ModelSettings | None = None,
        native_output: bool = False,
    ) -> None:
        try:
            parsed = httpx.URL(base_url)
        except httpx.InvalidURL as exc:
            raise ValueError(f"base url {base_url!r} is not a valid URL: {exc}") from exc
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"base url must be an absolute http(s) URL, got {base_url!r}")
        if not model.strip():
            raise ValueError("model must be a non-empty name")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.streaming = stream
        self._api_key = api_key
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._client = client if client is not None else default_client()
        base = settings or ModelSettings()
        # One max_tokens: the settings' (docs/providers.md); the argument only fills it in.
        self.settings = (
            base
            if base.max_tokens is not None or max_tokens is None
            else base.model_copy(update={"max_tokens": max_tokens})
        )
        """The spec's settings; a request's `settings` override them field by field."""
        self.capabilities = openai_capabilities(model)
        """What the model takes besides text; the factory applies the spec's `attachments=`."""
        self.native_output = native_output
        """A round that forces one tool asks for its arguments as structured output instead
        (`response_format` `json_schema`, where the server supports it); the reply's JSON comes
        back as that tool's call, so the harness sees one behaviour (docs/providers.md)."""

    def native_tool(self, request: ModelRequest) -> ToolSpec | None:
        """The tool a round forces and asks for as structured output (None: tools as usual)."""
        if not self.native_output:
            return None
        choice = request.settings_over(self.settings).tool_choice
        return next((t for t in request.tools if t.name == choice), None)

    @property
    def url(self) -> str:
        """The Chat Completions endpoint."""
        return f"{self.base_url}/chat/completions"

    def close(self) -> None:
        """Nothing to release: an injected client belongs to its owner, the default is shared."""

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for `request` (the transcript is checked first)."""
        check_transcript(request.messages)
        settings = request.settings_over(self.settings)
        self._check_settings(settings)
        body: dict[str, Any] = dict(settings.extra or {})
        body.update(
            model=self.model,
            messages=chat_messages(request.system, request.messages, self.capabilities),
            stream=self.streaming,
        )
        if self.streaming:
            body["stream_options"] = {"include_usage": True}
        native = self.native_tool(request)
        if request.tools:
            body["tools"] = chat_tools(request.tools)
            if native is not None:
                # The tools stay (the transcript's calls refer to them); the answer is the
                # forced tool's arguments as the response format's JSON.
                body["tool_choice"] = "none"
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": native.name, "schema": native.input_schema},
                }
            elif settings.tool_choice is not None:
                body["tool_choice"] = chat_tool_choice(settings.tool_choice, request.tools)
        if settings.max_tokens is not None:
            body["max_tokens"] = settings.max_tokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.top_p is not None:
            body["top_p"] = settings.top_p
        if settings.stop:
            body["stop"] = list(settings.stop)
        return body

    def _check_settings(self, settings: ModelSettings) -> None:
        """Settings Chat Completions has no field for fail the round with a clear error."""
        unsupported = [
            name
            for name, value in (
                ("guardrail", settings.guardrail),
                ("reasoning_budget", settings.reasoning_budget),
            )
            if value is not None
        ]
        owned = sorted(_OWN_FIELDS & set(settings.extra or {}))
        if unsupported or owned:
            what = ", ".join(unsupported) or f"extra fields {owned} (set by the provider)"
            raise FatalModelError(
                f"{self._label}: {what} cannot be sent to a Chat Completions endpoint "
                '(docs/providers.md, "Model settings"; server-specific fields go in `extra`)',
                code="configuration",
            )

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Stream one round; the last event is ResponseDone."""
        body = self.request_body(request)
        headers = {"Accept": "text/event-stream" if self.streaming else "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            with self._client.stream(
                "POST", self.url, json=body, headers=headers, timeout=self._timeout
            ) as response:
                if response.status_code != 200:
                    response.read()
                    raise self._http_error(response.status_code, _error_body(response))
                content_type = response.headers.get("content-type", "")
                native = self.native_tool(request)
                events: Iterable[StreamEvent]
                if self.streaming and not content_type.startswith("application/json"):
                    events = self._parse_stream(response.iter_lines(), request)
                else:
                    # Streaming off, or a server that ignored `stream: true` and sent the
                    # whole completion as JSON.
                    response.read()
                    events = self._parse_complete(response, request)
                yield from (events if native is None else as_tool_call(events, native.name))
        except httpx.TimeoutException as exc:
            raise RetryableModelError(
                f"{self._label}: timed out ({type(exc).__name__})", code="timeout"
            ) from exc
        except httpx.HTTPError as exc:
            # Connection refused/reset, peer closed mid-body, malformed chunked encoding.
            raise RetryableModelError(
                f"{self._label}: connection failed: {type(exc).__name__}: {exc}",
                code="connection",
            ) from exc

    # -- responses ------------------------------------------------------------------------------

    @property
    def _label(self) -> str:
        return f"openai-compatible {self.base_url} model {self.model}"

    def _parse_stream(self, lines: Iterable[str], request: ModelRequest) -> Iterator[StreamEvent]:
        state = _StreamState()
        done = False
        for data in sse_data(lines):
            if data.strip() == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(data)
            except ValueError as exc:
                raise RetryableModelError(
                    f"{self._label}: malformed stream chunk: {data[:200]!r}", code="protocol_error"
                ) from exc
            if not isinstance(chunk, dict):
                raise RetryableModelError(
                    f"{self._label}: stream chunk is not an object: {data[:200]!r}",
                    code="protocol_error",
                )
            try:
                events = list(self._chunk(chunk, state))
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                # A chunk of the wrong shape (a field of an unexpected type): garbled stream.
                raise RetryableModelError(
                    f"{self._label}: malformed stream chunk: {data[:200]!r}", code="protocol_error"
                ) from exc
            yield from events
        if not done or state.finish_reason is None:
            missing = "[DONE]" if state.finish_reason is not None else "a finish reason"
            raise RetryableModelError(
                f"{self._label}: stream ended without {missing}", code="stream_truncated"
            )
        yield from state.flush_unnamed()
        stop = self._stop_reason(state.finish_reason, state.assembler)
        usage = state.usage
        if usage is None:
            # llama-cpp-python ignores stream_options: an honest estimate, marked as one.
            usage = estimated_usage(request, state.assembler.message())
        yield state.assembler.finish(stop, usage, state.model or self.model)

    def _chunk(self, chunk: dict[str, Any], state: _StreamState) -> Iterator[StreamEvent]:
        if chunk.get("error"):
            raise self._stream_error(chunk["error"])
        if isinstance(chunk.get("model"), str):
            state.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            state.usage = _usage(chunk["usage"])
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            # llama.cpp, DeepSeek and older vLLM say `reasoning_content`; newer vLLM `reasoning`.
            reasoning = delta.get("reasoning_content", delta.get("reasoning"))
            if isinstance(reasoning, str):
                thought = state.assembler.reasoning("reasoning", text=reasoning)
                if thought is not None:
                    yield thought
            content = delta.get("content")
            if isinstance(content, str):
                text = state.assembler.text(content)
                if text is not None:
                    yield text
            for position, call in enumerate(delta.get("tool_calls") or ()):
                yield from state.tool_call_delta(position, call)
            if choice.get("finish_reason"):
                state.finish_reason = str(choice["finish_reason"])

    def _parse_complete(
        self, response: httpx.Response, request: ModelRequest
    ) -> Iterator[StreamEvent]:
        try:
            events = list(self._completion_events(response.json(), request))
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise RetryableModelError(
                f"{self._label}: malformed completion: {response.text[:200]!r}",
                code="protocol_error",
            ) from exc
        yield from events

    def _completion_events(self, payload: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        choice = payload["choices"][0]
        message = choice["message"]
        assembler = StreamAssembler()
        reasoning = message.get("reasoning_content", message.get("reasoning"))
        if isinstance(reasoning, str):
            thought = assembler.reasoning("reasoning", text=reasoning)
            if thought is not None:
                yield thought
        if isinstance(message.get("content"), str):
            text = assembler.text(message["content"])
            if text is not None:
                yield text
        for index, call in enumerate(message.get("tool_calls") or ()):
            function = call.get("function") or {}
            call_id = call.get("id") or _new_call_id()
            yield assembler.start_tool_call(index, call_id, str(function.get("name") or ""))
            piece = assembler.tool_arguments(index, _arguments_text(function.get("arguments")))
            if piece is not None:
                yield piece
        stop = self._stop_reason(str(choice.get("finish_reason") or ""), assembler)
        if isinstance(payload.get("usage"), dict):
            usage = _usage(payload["usage"])
        else:
            usage = estimated_usage(request, assembler.message())
        yield assembler.finish(stop, usage, str(payload.get("model") or self.model))

    def _stop_reason(self, finish_reason: str, assembler: StreamAssembler) -> StopReason:
        if finish_reason in ("abort", "error"):
            raise RetryableModelError(
                f"{self._label}: generation ended with {finish_reason!r}", code="aborted"
            )
        mapped = _FINISH_REASONS.get(finish_reason)
        # Some servers report "stop" (or their own reason) although the message carries tool
        # calls; the calls are what the harness must act on.
        if assembler.tool_call_count and mapped in (None, "end_turn"):
            return "tool_use"
        return mapped or "end_turn"

    # -- errors ---------------------------------------------------------------------------------

    def _http_error(self, status: int, error: _ServerError) -> ModelError:
        text = f"{self._label}: HTTP {status}: {error.message}"
        if error.code == "insufficient_quota":
            # OpenAI's 429 for an account out of credit: no retry can succeed.
            return FatalModelError(text, code="quota")
        if status == 429:
            return RetryableModelError(text, code="throttled")
        if status in (408, 504):
            return RetryableModelError(text, code="timeout")
        if status >= 500 or status == 409:
            return RetryableModelError(text, code="unavailable")
        if status in (401, 403):
            return FatalModelError(text, code="auth")
        if status == 404:
            return FatalModelError(text, code="not_found")
        if error.is_context_length:
            return FatalModelError(text, code="context_length")
        return FatalModelError(text, code="invalid_request")

    def _stream_error(self, raw: object) -> ModelError:
        error = _ServerError.from_json(raw)
        text = f"{self._label}: error inside the stream: {error.message}"
        if error.is_context_length:
            return FatalModelError(text, code="context_length")
        status = error.status
        if status is not None and 400 <= status < 500 and status not in (408, 409, 429):
            return FatalModelError(text, code="invalid_request")
        # A server failing mid-generation (overload, worker crash) usually recovers.
        return RetryableModelError(text, code="stream_error")


def default_client() -> httpx.Client:
    """The process-wide httpx client (thread-safe, pooled), so per-round providers share sockets
    (the process's client cache, `turnkeep.plumbing.clients`); a closed one is replaced.

    Timeouts are set per request by each provider.
    """
    from turnkeep.plumbing.clients import cached_client

    return cached_client(
        ("httpx", "model endpoints"),
        lambda: httpx.Client(timeout=DEFAULT_TIMEOUT),
        usable=lambda client: not client.is_closed,
    )


# -- stream state -------------------------------------------------------------------------------


@dataclass(slots=True)
class _CallState:
    id: str | None = None
    name: str | None = None
    started: bool = False
    buffered: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _StreamState:
    assembler: StreamAssembler = field(default_factory=StreamAssembler)
    calls: dict[object, _CallState] = field(default_factory=dict)
    last_key: object = None
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str = ""

    def tool_call_delta(self, position: int, raw: object) -> Iterator[StreamEvent]:
        """Apply one `tool_calls` delta; the call starts once its name is known."""
        if not isinstance(raw, dict):
            return
        function = raw.get("function") or {}
        call_id = raw.get("id")
        if isinstance(raw.get("index"), int):
            key: object = raw["index"]
        elif call_id:
            # Servers that omit `index` (Ollama sends each call whole) identify calls by id.
            key = ("id", call_id)
        else:
            key = self.last_key if self.last_key is not None else position
        self.last_key = key
        state = self.calls.setdefault(key, _CallState())
        if call_id and state.id is None:
            state.id = str(call_id)
        if function.get("name") and state.name is None:
            state.name = str(function["name"])
        arguments = _arguments_text(function.get("arguments"))
        if arguments:
            state.buffered.append(arguments)
        if not state.started and state.name is not None:
            yield from self._start(key, state)
        elif state.started:
            for piece in state.buffered:
                delta = self.assembler.tool_arguments(key, piece)
                if delta is not None:
                    yield delta
            state.buffered.clear()

    def flush_unnamed(self) -> Iterator[StreamEvent]:
        """Start calls whose name never arrived: the harness answers them with a tool error."""
        for key, state in self.calls.items():
            if not state.started:
                state.name = ""
                yield from self._start(key, state)

    def _start(self, key: object, state: _CallState) -> Iterator[StreamEvent]:
        state.started = True
        yield self.assembler.start_tool_call(key, state.id or _new_call_id(), state.name or "")
        for piece in state.buffered:
            delta = self.assembler.tool_arguments(key, piece)
            if delta is not None:
                yield delta
        state.buffered.clear()


# -- wire mapping -------------------------------------------------------------------------------


def chat_messages(
    system: str, messages: Sequence[Message], capabilities: Capabilities = SCRIPTED
) -> list[dict[str, Any]]:
    """Map the system prompt and transcript to Chat Completions messages.

    Assistant tool calls carry their raw argument text, or `{}` when that text is not a JSON
    object (Ollama and vLLM parse it and would reject the request; the harness already answered
    the call with a tool error saying so); every tool result becomes its own `tool` message
    (`tool_call_id`), error results prefixed with TOOL_ERROR_PREFIX. Attachments become content
    parts as `capabilities` allow (docs/attachments.md, "On the wire"); the turn-start check has
    refused the kinds the model cannot take.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
        if message.role == "assistant":
            calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
            entry: dict[str, Any] = {"role": "assistant"}
            if text or not calls:
                # A message of tool calls only leaves `content` out: llama-cpp-python's server
                # refuses `"content": null` with HTTP 500; OpenAI, vLLM and llama-server accept
                # both.
                entry["content"] = text
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": _sent_arguments(call)},
                    }
                    for call in calls
                ]
            out.append(entry)
            continue
        shown: list[dict[str, Any]] = []
        for result in results:
            content = result.content
            if result.is_error:
                content = TOOL_ERROR_PREFIX + content
            if result.attachments and not capabilities.tool_images:
                why = "returned by the tool; this model cannot see images"
                content += "".join("\n" + omitted_text(a, why) for a in result.attachments)
            elif result.attachments:
                shown += _tool_images(result)
            out.append({"role": "tool", "tool_call_id": result.call_id, "content": content})
        if shown:
            # A `tool` message carries text only: the images follow in a user message.
            out.append({"role": "user", "content": shown})
        attachments = [p for p in message.parts if isinstance(p, AttachmentPart)]
        if attachments:
            out.append({"role": "user", "content": _user_content(message, capabilities)})
        elif message.role == "user" or text:
            out.append({"role": "user", "content": text})
    return out


def _tool_images(result: ToolResultPart) -> list[dict[str, Any]]:
    intro = f"Images returned by tool {result.name} (call {result.call_id}):"
    parts = [chat_content_part(a, pdf_files=False) for a in result.attachments]
    return [{"type": "text", "text": intro}, *parts]


def _user_content(message: Message, capabilities: Capabilities) -> list[dict[str, Any]]:
    """A user message with attachments as content parts, in the message's order."""
    pdf_files = "pdf" in capabilities.documents
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.text:
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, AttachmentPart):
            content.append(chat_content_part(part, pdf_files=pdf_files))
    return content


def _sent_arguments(call: ToolCallPart) -> str:
    return call.arguments if arguments_object(call.arguments) is not None else "{}"


def as_tool_call(events: Iterable[StreamEvent], name: str) -> Iterator[StreamEvent]:
    """A structured-output reply as the forced tool's call: its text is the call's arguments
    (reasoning passes through), so the round settles as if the tool had been called."""
    assembler = StreamAssembler()
    started = False
    for event in events:
        if isinstance(event, TextDelta):
            if not started:
                started = True
                yield assembler.start_tool_call(0, _new_call_id(), name)
            piece = assembler.tool_arguments(0, event.text)
            if piece is not None:
                yield piece
        elif isinstance(event, ReasoningDelta):
            thought = assembler.reasoning(event.index, text=event.text, signature=event.signature)
            if thought is not None:
                yield thought
        elif isinstance(event, ResponseDone):
            if not started:
                yield assembler.start_tool_call(0, _new_call_id(), name)
            done = event.response
            stop: StopReason = "max_tokens" if done.stop_reason == "max_tokens" else "tool_use"
            yield assembler.finish(stop, done.usage, done.model)


def chat_tool_choice(choice: str, tools: Sequence[ToolSpec]) -> str | dict[str, Any]:
    """Chat Completions `tool_choice`: 'auto' / 'required' ('any' is its alias) / 'none', or
    the named function (FatalModelError when no tool of the round has that name)."""
    if choice in ("auto", "required", "none"):
        return choice
    if choice == "any":
        return "required"
    names = sorted(tool.name for tool in tools)
    if choice not in names:
        raise FatalModelError(
            f"tool_choice {choice!r} names no tool of this round (tools: {names})",
            code="configuration",
        )
    return {"type": "function", "function": {"name": choice}}


def chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Chat Completions `tools` (`function` entries with the JSON schema as `parameters`)."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            },
        }
        for tool in tools
    ]


def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The `data` payload of each complete server-sent event (multi-line data joined by \\n).

    An event is complete at its blank line; a trailing event cut off by the end of the stream
    is dropped unless it is the `[DONE]` marker.
    """
    buffer: list[str] = []
    for line in lines:
        if not line:
            if buffer:
                yield "\n".join(buffer)
                buffer = []
            continue
        if line.startswith(":"):
            continue  # comment / keep-alive
        name, _, value = line.partition(":")
        if name == "data":
            buffer.append(value[1:] if value.startswith(" ") else value)
    if buffer and "\n".join(buffer).strip() == "[DONE]":
        yield "[DONE]"


@dataclass(frozen=True, slots=True)
class _ServerError:
    message: str
    code: str = ""
    status: int | None = None
    type: str = ""

    @property
    def is_context_length(self) -> bool:
        codes = f"{self.code} {self.type}"
        return any(c in codes for c in _CONTEXT_CODES) or bool(_CONTEXT_LENGTH.search(self.message))

    @classmethod
    def from_json(cls, raw: object) -> _ServerError:
        if isinstance(raw, dict):
            inner = raw.get("error", raw)
            if isinstance(inner, dict):
                message = inner.get("message") or inner.get("detail") or json.dumps(inner)
                code = inner.get("code") or inner.get("type") or ""
                # vLLM and llama-server send the HTTP status as an integer `code`; the kind of
                # error is then only in `type` (llama-server's `exceed_context_size_error`).
                status = next(
                    (inner[k] for k in ("status", "code") if type(inner.get(k)) is int), None
                )
                kind = str(inner.get("type") or "")
                return cls(_bounded(str(message)), str(code), status, kind)
            return cls(_bounded(str(inner)))
        return cls(_bounded(str(raw)))


def _error_body(response: httpx.Response) -> _ServerError:
    try:
        return _ServerError.from_json(response.json())
    except ValueError:
        return _ServerError(_bounded(response.text.strip() or response.reason_phrase))


def _bounded(text: str) -> str:
    if len(text) <= _MAX_ERROR_TEXT:
        return text
    return f"{text[:_MAX_ERROR_TEXT]}… ({len(text) - _MAX_ERROR_TEXT} more characters)"


def _usage(raw: dict[str, Any]) -> Usage:
    """Usage from `prompt_tokens` (cached tokens reported apart, as Bedrock does)."""
    details = raw.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    prompt = int(raw.get("prompt_tokens") or 0)
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cache_read_tokens=cached,
    )


def _arguments_text(value: object) -> str:
    """Raw argument text of a call (delta); Ollama may send the arguments as an object.

    Any other JSON value is kept as its JSON text, so the harness reports it as not an object.
    """
    if value is None or isinstance(value, str):
        return value or ""
    return json.dumps(value, ensure_ascii=False)


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
