"""The tool registry: named tools, their specs, and argument validation into model-visible errors.

A model's tool call carries raw JSON text. `ToolRegistry.run_call` parses and validates it against
the tool's pydantic model; unknown tools, bad JSON, schema violations and handler exceptions all
become a `ToolResult(is_error=True)` whose text the model sees — never a crash of the turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from turnkeep.providers.base import ToolSpec
from turnkeep.tools.base import Tool, ToolContext, ToolResult
from turnkeep.tools.isolation import ToolRunner, run_in_process
from turnkeep.tools.names import tool_name_problem

MAX_ERROR_DETAILS = 8


class ToolRegistryError(ValueError):
    """A tool could not be registered (bad or duplicate name)."""


@dataclass(frozen=True, slots=True)
class SourceProblem:
    """A tool source whose tools are not (all) in the registry, and why.

    `tools`: the names left out (a clash); empty when the whole source could not be listed.
    `required` / `retryable`: the source's and the error's (the failure rule of
    `turnkeep.tools.sources`).
    """

    source: str
    message: str
    required: bool = False
    retryable: bool = True
    tools: tuple[str, ...] = ()


class ToolRegistry:
    """An ordered set of tools keyed by name."""

    def __init__(self, tools: Iterable[Tool[Any]] = (), *, source: str | None = None) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._sources: dict[str, str] = {}
        self.unavailable: dict[str, str] = {}
        """Tool sources that could not be listed: source name -> the error (it names it)."""
        self.problems: list[SourceProblem] = []
        """Every source left out whole (`unavailable`) or in part (clashing tools), in order."""
        for tool in tools:
            self.register(tool, source=source)

    def register(self, tool: Tool[Any], *, source: str | None = None) -> None:
        """Add `tool`; its name must be unique and match [A-Za-z0-9_-]{1,64} (provider limits).

        `source` labels where it comes from (`builtin`, `notes`, `function`, `mcp:<server>`).
        """
        if not isinstance(tool, Tool):
            raise ToolRegistryError(f"register needs a Tool, got {type(tool).__name__}")
        problem = tool_name_problem(tool.name)
        if problem is not None:
            raise ToolRegistryError(problem)
        if not (isinstance(tool.args_model, type) and issubclass(tool.args_model, BaseModel)):
            raise ToolRegistryError(f"tool {tool.name!r}: args_model must be a pydantic model")
        if tool.name in self._tools:
            raise ToolRegistryError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        if source is not None:
            self._sources[tool.name] = source

    def extend(self, tools: Iterable[Tool[Any]], *, source: str | None = None) -> ToolRegistry:
        """Register several tools; returns self for chaining."""
        for tool in tools:
            self.register(tool, source=source)
        return self

    def source_of(self, name: str) -> str | None:
        """The label `name` was registered with (None: unlabelled or unknown)."""
        return self._sources.get(name)

    def mark_unavailable(
        self, source: str, error: str, *, required: bool = False, retryable: bool = True
    ) -> None:
        """Record that tool source `source` could not be listed (its tools are `source_*`)."""
        self.unavailable[source] = error
        self.problems.append(SourceProblem(source, error, required, retryable))

    def mark_left_out(self, source: str, tools: Iterable[str], message: str) -> None:
        """Record that these tools of optional source `source` were left out (`message`)."""
        self.problems.append(SourceProblem(source, message, tools=tuple(tools)))

    def blocking_problem(self) -> SourceProblem | None:
        """The first problem of a required source: a model round cannot run without it."""
        return next((p for p in self.problems if p.required), None)

    def unavailable_error(self, name: str) -> str | None:
        """The listing error of the unavailable source a tool called `name` would belong to."""
        if name in self._tools:
            return None
        for source, error in self.unavailable.items():
            if name.startswith(f"{source}_"):
                return error
        return None

    def get(self, name: str) -> Tool[Any] | None:
        """The tool called `name`, or None."""
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        """Registered names in registration order."""
        return list(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told about every tool, in registration order."""
        return tuple(
            _spec(tool.name, tool.description, tool.args_model) for tool in self._tools.values()
        )

    def is_replay_safe(self, name: str) -> bool:
        """True if `name` is registered and declares itself safe to re-run."""
        tool = self._tools.get(name)
        return tool is not None and tool.replay_safe

    def requires_approval(self, name: str) -> bool:
        """True if `name` is registered with `requires_approval`."""
        tool = self._tools.get(name)
        return tool is not None and tool.requires_approval

    def parse_arguments(self, name: str, arguments: str) -> BaseModel | ToolResult:
        """Validated arguments for a call of `name`, or the error result the model should see."""
        tool = self._tools.get(name)
        unavailable = self.unavailable_error(name) if tool is None else None
        if unavailable is not None:
            return ToolResult(
                f"Error: tool {name} is unavailable: {unavailable}. The call did not run; try "
                "again later or do without it.",
                True,
            )
        if tool is None:
            known = ", ".join(self._tools) or "(none)"
            return ToolResult(f"Error: unknown tool {name!r}. Available tools: {known}.", True)
        text = arguments.strip() if isinstance(arguments, str) else ""
        try:
            raw = json.loads(text) if text else {}
        except json.JSONDecodeError as exc:
            return ToolResult(
                f"Error: the arguments of {name} are not valid JSON ({exc.msg} at position "
                f"{exc.pos}). Send a JSON object matching the tool's schema.",
                True,
            )
        if not isinstance(raw, dict):
            return ToolResult(
                f"Error: the arguments of {name} must be a JSON object, got {type(raw).__name__}.",
                True,
            )
        model = tool.args_model
        # One rule for every tool (docs/agent.md, "Arguments"): JSON values are taken as the
        # types they are, never coerced ("3" is not 3); a model that refuses unknown fields
        # refuses them at every depth, in its nested models too.
        extra: Literal["forbid"] | None = (
            "forbid" if model.model_config.get("extra") == "forbid" else None
        )
        try:
            parsed: BaseModel = model.model_validate_json(text or "{}", strict=True, extra=extra)
        except ValidationError as exc:
            return ToolResult(_validation_text(name, exc), True)
        return parsed

    def run_call(
        self, name: str, arguments: str, ctx: ToolContext, runner: ToolRunner | None = None
    ) -> ToolResult:
        """Parse, validate and run one call (through `runner`, default in this thread); every
        failure becomes an error result."""
        parsed = self.parse_arguments(name, arguments)
        if isinstance(parsed, ToolResult):
            return parsed
        tool = self._tools[name]
        try:
            result = (
                runner.run(tool, parsed, ctx)
                if runner is not None
                else run_in_process(tool, parsed, ctx)
            )
        except Exception as exc:  # a tool bug must reach the model as text, not end the turn
            return ToolResult(f"Error: tool {name} failed: {type(exc).__name__}: {exc}", True)
        if not isinstance(result, ToolResult):
            return ToolResult(
                f"Error: tool {name} returned {type(result).__name__}, not a ToolResult", True
            )
        if not isinstance(result.content, str):
            return ToolResult(
                f"Error: tool {name} returned content of type "
                f"{type(result.content).__name__}, not text",
                True,
            )
        return result


_SPECS: dict[tuple[str, str, type[BaseModel]], ToolSpec] = {}


def _spec(name: str, description: str, args_model: type[BaseModel]) -> ToolSpec:
    # Building a JSON schema costs ~0.1 ms per tool and a step builds the registry every round;
    # tools are few and fixed, so the cache stays small.
    key = (name, description, args_model)
    spec = _SPECS.get(key)
    if spec is None:
        spec = _SPECS[key] = ToolSpec(name, description, args_model.model_json_schema())
    return spec


def _validation_text(name: str, exc: ValidationError) -> str:
    details = []
    for error in exc.errors()[:MAX_ERROR_DETAILS]:
        where = ".".join(str(p) for p in error["loc"]) or "(arguments)"
        details.append(f"{where}: {error['msg']}")
    more = exc.error_count() - len(details)
    if more > 0:
        details.append(f"... and {more} more")
    return f"Error: invalid arguments for {name}: " + "; ".join(details)
