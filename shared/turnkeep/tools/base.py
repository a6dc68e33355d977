"""Tools: a name, a description, a pydantic argument model, replay safety, and a handler."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Generic, Literal, TypeVar

from pydantic import BaseModel

from turnkeep.providers.base import ToolSpec
from turnkeep.tools.context import ToolContext
from turnkeep.tools.images import Image

A = TypeVar("A", bound=BaseModel)

__all__ = ["READ_TOOL_RESULT", "Image", "Tool", "ToolContext", "ToolResult"]

READ_TOOL_RESULT: Final = "read_tool_result"
"""The always-on tool that pages through a long tool result (turnkeep.harness.tool_results)."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns to the model; `is_error` marks a failure the model should see.

    `images` reach the model inside the result where it takes them (docs/attachments.md)."""

    content: str
    is_error: bool = False
    images: tuple[Image, ...] = ()


@dataclass(frozen=True, slots=True)
class Tool(Generic[A]):
    """A tool the model may call.

    `replay_safe` declares that running the call again after an unknown outcome (a crash
    mid-call) is harmless; otherwise the harness records the call as interrupted.
    `isolation`: `"process"` (the default) lets a long-lived server run the call in a worker
    process it can time-limit and kill (`turnkeep.tools.isolation`); `"in_process"` declares the
    tool bounded by design (or bound to live objects of the process) so it always runs in the
    calling thread. `requires_approval`: each call pauses the turn until a person approves,
    edits or denies it (a session can ask for more through its `toolApproval` host key).
    A plain function becomes one through `turnkeep.tool` (`turnkeep.agent.function_tool`).
    """

    name: str
    description: str
    args_model: type[A]
    handler: Callable[[A, ToolContext], ToolResult]
    replay_safe: bool = False
    isolation: Literal["process", "in_process"] = "process"
    requires_approval: bool = False
    """Every call waits for a person's decision first (docs/approvals.md)."""
    timeout_seconds: float | None = None
    """The call's limit in every runner (None: the runner's; the local server's
    `TURNKEEP_TOOL_TIMEOUT_SECONDS`, none in-process). docs/agent.md, "Timeouts"."""

    @property
    def uses_context(self) -> bool:
        """Whether the handler may read the context's `state` and `deps` (a worker process then
        receives them); a function tool without a `ToolContext` parameter does not."""
        return True

    def spec(self) -> ToolSpec:
        """The JSON-schema description the model receives."""
        return ToolSpec(self.name, self.description, self.args_model.model_json_schema())

    def run(self, args: A, ctx: ToolContext) -> ToolResult:
        """Call the handler with validated arguments."""
        return self.handler(args, ctx)
