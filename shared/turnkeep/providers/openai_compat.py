"""Any OpenAI-compatible Chat Completions endpoint (OpenAI, Ollama, vLLM, ...) over httpx.

One round is one POST `{base_url}/chat/completions` with `stream: true` (server-sent events,
usage requested from the final chunk). Streamed `tool_calls` deltas are reassembled by index;
the argument text is passed on raw (the harness validates it). Errors are classified and never
retried here: 429/5xx/timeouts/dropped streams are retryable, 4xx are fatal with the server's
message.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

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
_CONTEXT_LENGTH = re.compile(
    r"context[_ ]length|context window|maximum context|too many tokens|prompt is too long",
    re.IGNORECASE,
)


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
        self.max_tokens = max_tokens
        self._api_key = api_key
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._client = client if client is not None else default_client()

    @property
    def url(self) -> str:
        """The Chat Completions endpoint."""
        return f"{self.base_url}/chat/completions"

    def close(self) -> None:
        """Nothing to release: an injected client belongs to its owner, the default is shared."""

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for `request` (the transcript is checked first)."""
        check_transcript(request.messages)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(request.system, request.messages),
            "stream": self.streaming,
        }
        if self.streaming:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = chat_tools(request.tools)
        max_tokens = request.max_tokens or self.max_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        return body

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
                if self.streaming and not content_type.startswith("application/json"):
                    yield from self._parse_stream(response.iter_lines())
                else:
                    # Streaming off, or a server that ignored `stream: true` and sent the
                    # whole completion as JSON.
                    response.read()
                    yield from self._parse_complete(response)
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

    def _parse_stream(self, lines: Iterable[str]) -> Iterator[StreamEvent]:
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
        yield state.assembler.finish(stop, state.usage, state.model or self.model)

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
            content = delta.get("content")
            if isinstance(content, str):
                text = state.assembler.text(content)
                if text is not None:
                    yield text
            for position, call in enumerate(delta.get("tool_calls") or ()):
                yield from state.tool_call_delta(position, call)
            if choice.get("finish_reason"):
                state.finish_reason = str(choice["finish_reason"])

    def _parse_complete(self, response: httpx.Response) -> Iterator[StreamEvent]:
        try:
            events = list(self._completion_events(response.json()))
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise RetryableModelError(
                f"{self._label}: malformed completion: {response.text[:200]!r}",
                code="protocol_error",
            ) from exc
        yield from events

    def _completion_events(self, payload: Any) -> Iterator[StreamEvent]:
        choice = payload["choices"][0]
        message = choice["message"]
        assembler = StreamAssembler()
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
        usage = _usage(payload["usage"]) if isinstance(payload.get("usage"), dict) else Usage()
        stop = self._stop_reason(str(choice.get("finish_reason") or ""), assembler)
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


_shared_clients: dict[str, httpx.Client] = {}
_shared_clients_lock = threading.Lock()


def default_client() -> httpx.Client:
    """The process-wide httpx client (thread-safe, pooled), so per-round providers share sockets.

    Timeouts are set per request by each provider.
    """
    with _shared_clients_lock:
        client = _shared_clients.get("default")
        if client is None or client.is_closed:
            client = _shared_clients["default"] = httpx.Client(timeout=DEFAULT_TIMEOUT)
        return client


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
    usage: Usage = field(default_factory=Usage)
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


def chat_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Map the system prompt and transcript to Chat Completions messages.

    Assistant tool calls carry their raw argument text, or `{}` when that text is not a JSON
    object (Ollama and vLLM parse it and would reject the request; the harness already answered
    the call with a tool error saying so); every tool result becomes its own `tool` message
    (`tool_call_id`), error results prefixed with TOOL_ERROR_PREFIX.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
        if message.role == "assistant":
            calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": _sent_arguments(call)},
                    }
                    for call in calls
                ]
            else:
                entry["content"] = text
            out.append(entry)
            continue
        for result in results:
            content = result.content
            if result.is_error:
                content = TOOL_ERROR_PREFIX + content
            out.append({"role": "tool", "tool_call_id": result.call_id, "content": content})
        if message.role == "user" or text:
            out.append({"role": "user", "content": text})
    return out


def _sent_arguments(call: ToolCallPart) -> str:
    return call.arguments if arguments_object(call.arguments) is not None else "{}"


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

    @property
    def is_context_length(self) -> bool:
        return "context_length" in self.code or bool(_CONTEXT_LENGTH.search(self.message))

    @classmethod
    def from_json(cls, raw: object) -> _ServerError:
        if isinstance(raw, dict):
            inner = raw.get("error", raw)
            if isinstance(inner, dict):
                message = inner.get("message") or inner.get("detail") or json.dumps(inner)
                code = inner.get("code") or inner.get("type") or ""
                # vLLM sends the HTTP status as an integer `code`.
                status = next(
                    (inner[k] for k in ("status", "code") if type(inner.get(k)) is int), None
                )
                return cls(_bounded(str(message)), str(code), status)
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
