"""Tool results sized against the model's context: a long result is kept whole in the session's
storage and the model gets a preview with the way to read the rest, the always-on
`read_tool_result(call_id, offset)` tool (docs/harness.md, "Tool results").

The preview (and a page of `read_tool_result`) is `tool_result_share` of the model's input
budget, at 4 characters a token, at least `MIN_PREVIEW_CHARS`. What is stored is capped by
`max_tool_result_bytes`; beyond it the result is cut, and the preview says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, ConfigDict, Field

from turnkeep.providers.base import ModelProvider
from turnkeep.providers.context import ContextWindow
from turnkeep.storage import Storage, Value, Write, set_value, value
from turnkeep.tools.base import READ_TOOL_RESULT, Tool, ToolContext, ToolResult

if TYPE_CHECKING:  # the deps build this module's tool into every registry
    from turnkeep.harness.deps import HarnessDeps

RESULT_NAMESPACE: Final = "tool_result"
CHARS_PER_TOKEN: Final = 4  # the estimate of turnkeep.harness.context
MIN_PREVIEW_CHARS: Final = 1_000
CHUNK_CHARS: Final = 49_152
"""Characters per stored chunk: at worst 6 bytes a character as JSON, under every backend's
per-value limit (DynamoDB's 350,000 bytes inline)."""

_WINDOWS: dict[tuple[object, str | None], ContextWindow] = {}


def preview_chars(window: ContextWindow, share: float) -> int:
    """Characters of a result the model is shown at once: `share` of the input budget."""
    return max(MIN_PREVIEW_CHARS, math.floor(window.input_budget * share * CHARS_PER_TOKEN))


def turn_window(deps: HarnessDeps, model: str | None) -> ContextWindow:
    """The context window of the turn's model; a resolver's provider is built once per
    process and model spec (building one may cost a client or a secret read)."""
    if isinstance(deps.provider, ModelProvider):
        return deps.provider.context
    key = (deps.provider, model)  # the resolver itself: held, so its identity is never reused
    found = _WINDOWS.get(key)
    if found is None:
        found = _WINDOWS[key] = deps.provider_for(model).context
    return found


def index_address(call_id: str) -> Value:
    """Where a stored result's size and chunk count live (a later call of the same id wins)."""
    return value(RESULT_NAMESPACE, call_id)


def chunk_address(call_id: str, index: int) -> Value:
    """The `index`-th chunk of a stored result."""
    return value(RESULT_NAMESPACE, f"{call_id}#{index}")


@dataclass(frozen=True, slots=True)
class SizedResult:
    """What the model sees (`content`) and the writes that keep the whole result (none when
    it fits its preview)."""

    content: str
    writes: list[Write]


def _next_hint(call_id: str, offset: int) -> str:
    return f'read_tool_result {{"call_id": "{call_id}", "offset": {offset}}}'


def size_result(content: str, call_id: str, preview: int, max_bytes: int) -> SizedResult:
    """`content` as the model gets it: whole when it fits `preview` characters, else the
    preview and a marker naming the whole size and the next offset to read."""
    if len(content) <= preview:
        return SizedResult(content, [])
    raw = content.encode("utf-8")
    kept, cut = content, ""
    if len(raw) > max_bytes:
        kept = raw[:max_bytes].decode("utf-8", errors="ignore")
        cut = (
            f" The result was {len(raw)} bytes; only its first {max_bytes} bytes were kept "
            f"(max_tool_result_bytes), so reading stops at character {len(kept)}."
        )
    chunks = [kept[i : i + CHUNK_CHARS] for i in range(0, len(kept), CHUNK_CHARS)]
    writes: list[Write] = [set_value(chunk_address(call_id, i), c) for i, c in enumerate(chunks)]
    writes.append(
        set_value(
            index_address(call_id),
            {"chars": len(kept), "bytes": len(raw), "chunks": len(chunks), "page": preview},
        )
    )
    marker = (
        f"\n[tool result truncated: showing characters 0-{preview} of {len(kept)}; the whole "
        f"result is kept.{cut} Call {_next_hint(call_id, preview)} to read the next part.]"
    )
    return SizedResult(kept[:preview] + marker, writes)


class ReadArgs(BaseModel):
    """Which stored result, from where."""

    model_config = ConfigDict(extra="forbid")

    call_id: str = Field(min_length=1, description="The call id of the truncated tool result.")
    offset: int = Field(
        ge=0, description="The character to read from (the offset its last part named)."
    )


_READ_DESCRIPTION: Final = (
    "Read more of a tool result that was too long to show whole: its text from `offset`, one "
    "page at a time. A truncated result names its call id and the offset of its next part."
)


def _page(storage: Storage, args: ReadArgs) -> ToolResult:
    index = storage.get_value(index_address(args.call_id))
    if index is None or not isinstance(index.value, dict):
        return ToolResult(
            f"Error: no stored tool result for call id {args.call_id!r} in this session. Only "
            "results too long to show whole are stored; a result shown without a "
            "'[tool result truncated' marker is already whole.",
            True,
        )
    total, page = index.value.get("chars"), index.value.get("page")
    if not isinstance(total, int) or not isinstance(page, int) or page < 1:
        return ToolResult(f"Error: the stored result of call {args.call_id!r} is unreadable.", True)
    if args.offset >= total:
        return ToolResult(
            f"Error: offset {args.offset} is past the end of the result of call "
            f"{args.call_id!r}, which has {total} characters (read from 0 to {total - 1}).",
            True,
        )
    end = min(total, args.offset + page)
    first, last = args.offset // CHUNK_CHARS, (end - 1) // CHUNK_CHARS
    stored = [storage.get_value(chunk_address(args.call_id, i)) for i in range(first, last + 1)]
    if any(s is None or not isinstance(s.value, str) for s in stored):
        return ToolResult(
            f"Error: the stored result of call {args.call_id!r} is incomplete; it cannot be read.",
            True,
        )
    text = "".join(str(s.value) for s in stored if s is not None)
    start = args.offset - first * CHUNK_CHARS
    piece = text[start : start + (end - args.offset)]
    more = (
        f"call {_next_hint(args.call_id, end)} for the next part"
        if end < total
        else "this is the end of the result"
    )
    return ToolResult(f"{piece}\n[characters {args.offset}-{end} of {total}; {more}.]")


def read_tool_result_tool(open_storage: Callable[[str], Storage], session_id: str) -> Tool[Any]:
    """`read_tool_result` bound to `session_id`: it reads only that session's results."""

    def read(args: ReadArgs, _: ToolContext) -> ToolResult:
        storage = open_storage(session_id)
        try:
            return _page(storage, args)
        finally:
            storage.close()

    return Tool(
        name=READ_TOOL_RESULT,
        description=_READ_DESCRIPTION,
        args_model=ReadArgs,
        handler=read,
        replay_safe=True,
        isolation="in_process",
    )
