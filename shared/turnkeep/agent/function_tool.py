"""Tools from plain functions: `@tool`, or a bare function in `Agent(tools=[...])`.

The name is the function's, the description its docstring's text before an `Args:` section,
each argument's description that section's line for it, and the argument schema the function's
type hints as pydantic reads them (defaults, `Optional`, `Literal`/enums, nested models, lists).
A parameter annotated `ToolContext` receives the call's context and is not part of the schema.
The return value becomes the result text (a `str` as it is, anything else as JSON; a
`ToolResult` as it is); an exception becomes a tool error result the model sees; an `async def`
function runs in an event loop of its own. docs/agent.md is the reference.
"""

from __future__ import annotations

import importlib
import inspect
import pickle  # nosec B403  # only __reduce__ hooks here; nothing is ever loaded from bytes
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypedDict, Unpack, overload

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_json

from turnkeep.tools.base import Tool, ToolContext, ToolResult
from turnkeep.tools.images import Image
from turnkeep.tools.names import tool_name_problem

Isolation = Literal["process", "in_process"]
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$")
_OTHER_SECTION = re.compile(
    r"^\s*(Returns?|Yields?|Raises?|Examples?|Notes?|Attributes|See Also)\s*:\s*$"
)
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


class ToolDefinitionError(ValueError):
    """A function cannot become a tool (no type hint, *args, a bad name...); one line."""


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {argument: text}) of a Google-style docstring.

    The description is the text before the first section heading; `Args:` (or `Arguments:`,
    `Parameters:`) lines `name: text` or `name (type): text`, continued on deeper-indented
    lines, give the per-argument texts.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    current: str | None = None
    indent: int | None = None
    mode = "description"
    for line in lines:
        if _SECTION.match(line):
            mode, current, indent = "args", None, None
            continue
        if _OTHER_SECTION.match(line):
            mode = "other"
            continue
        if mode == "description":
            description.append(line)
        elif mode == "args" and line.strip():
            depth = len(line) - len(line.lstrip())
            match = _ARG_LINE.match(line)
            if match and (indent is None or depth <= indent):
                indent, current = depth, match.group(1)
                args[current] = match.group(3).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}".strip()
    text = " ".join(" ".join(description).split())
    return text, args


class FunctionArgs(BaseModel):
    """Base of a function tool's generated argument model: unknown arguments are refused (at
    every depth: the registry validates with `extra="forbid"`, and the schema says so), and an
    instance crosses a process boundary by its tool's import path (the class is generated)."""

    model_config = ConfigDict(extra="forbid")
    _tool_ref: typing.ClassVar[tuple[str, str] | None] = None

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Pydantic's schema, with every nested model closed (`additionalProperties: false`)
        as the registry's validation is, so the model is told what is refused."""
        schema = super().model_json_schema(*args, **kwargs)
        for definition in schema.get("$defs", {}).values():
            if definition.get("type") == "object" and "properties" in definition:
                definition.setdefault("additionalProperties", False)
        return schema

    def __reduce__(self) -> tuple[Any, ...]:
        ref = type(self)._tool_ref
        if ref is None:
            raise pickle.PicklingError(f"{type(self).__name__}: its tool has no import path")
        return (_rebuild_args, (ref, self.model_dump()))


def _rebuild_args(ref: tuple[str, str], data: dict[str, Any]) -> BaseModel:
    return resolve_function_tool(ref).args_model.model_validate(data)


_RESOLVED: dict[tuple[str, str], FunctionTool] = {}


def _import_path(fn: Callable[..., Any]) -> tuple[str, str] | None:
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    return module, qualname


def resolve_function_tool(ref: tuple[str, str]) -> FunctionTool:
    """The function tool at `module:qualname` (a decorated function, or a bare one made a tool
    with default options): what a worker process rebuilds a pickled tool from."""
    found = _RESOLVED.get(ref)
    if found is not None:
        return found
    module, qualname = ref
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    if isinstance(target, FunctionTool):
        found = target
    elif callable(target):
        found = function_tool(target)
    else:
        raise pickle.UnpicklingError(f"{module}:{qualname} is not a function")
    _RESOLVED[ref] = found
    return found


class _Handler:
    """Calls the function with the validated arguments and turns what happens into a result."""

    __slots__ = ("context_param", "fn", "name", "params", "timeout_seconds")

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str,
        params: tuple[str, ...],
        context_param: str | None,
        timeout_seconds: float | None,
    ) -> None:
        self.fn, self.name, self.params = fn, name, params
        self.context_param, self.timeout_seconds = context_param, timeout_seconds

    def __call__(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        kwargs = {p: getattr(args, p) for p in self.params}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        try:
            value = self.fn(**kwargs)
            if inspect.isawaitable(value):
                value = _await(value, self.timeout_seconds)
        except TimeoutError:
            return ToolResult(
                f"Error: tool {self.name} did not finish within its limit of "
                f"{self.timeout_seconds:g} s and was cancelled.",
                True,
            )
        except Exception as exc:  # the model sees the failure; the turn goes on
            return ToolResult(f"Error: tool {self.name} failed: {type(exc).__name__}: {exc}", True)
        return result_of(self.name, value)


def _await(awaitable: Any, timeout: float | None) -> Any:
    # Imported here: a Lambda step without async tools never pays for asyncio's import.
    import asyncio

    async def bounded() -> Any:
        return await asyncio.wait_for(awaitable, timeout)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    # Called from inside a running loop (an embedding app): a thread of its own runs this one.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, bounded()).result()


def result_of(name: str, value: object) -> ToolResult:
    """A function's return value as a tool result: text as it is, an `Image` (or a list of
    texts and images) as images with their text, anything else as JSON."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    if isinstance(value, Image):
        value = [value]
    if isinstance(value, list | tuple) and any(isinstance(v, Image) for v in value):
        return _with_images(name, value)
    try:
        return ToolResult(to_json(value).decode("utf-8"))
    except Exception as exc:  # pydantic_core raises PydanticSerializationError and others
        return ToolResult(
            f"Error: tool {name} returned {type(value).__name__}, which is not text or "
            f"JSON-serialisable ({exc})",
            True,
        )


def _with_images(name: str, values: list[object] | tuple[object, ...]) -> ToolResult:
    images = tuple(v for v in values if isinstance(v, Image))
    texts = [v for v in values if not isinstance(v, Image)]
    if not all(isinstance(t, str) for t in texts):
        return ToolResult(
            f"Error: tool {name} returned images with values that are not text; return a list "
            "of str and turnkeep.Image",
            True,
        )
    listed = ", ".join(f"{i.name} ({i.media_type}, {len(i.data)} bytes)" for i in images)
    text = "\n".join(str(t) for t in texts) or f"[image: {listed}]"
    return ToolResult(text, images=images)


class FunctionTool(Tool[BaseModel]):
    """A `Tool` made from a function; calling it calls the function, and it pickles by the
    function's import path (so process isolation works for module-level functions)."""

    __slots__ = ("function",)
    function: Callable[..., Any]

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str,
        description: str,
        args_model: type[BaseModel],
        handler: _Handler,
        replay_safe: bool,
        isolation: Isolation,
        requires_approval: bool,
        timeout_seconds: float | None,
    ) -> None:
        super().__init__(
            name=name,
            description=description,
            args_model=args_model,
            handler=handler,
            replay_safe=replay_safe,
            isolation=isolation,
            requires_approval=requires_approval,
            timeout_seconds=timeout_seconds,
        )
        object.__setattr__(self, "function", function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    @property
    def uses_context(self) -> bool:
        """Only a function with a `ToolContext` parameter sees the context."""
        handler = self.handler
        return isinstance(handler, _Handler) and handler.context_param is not None

    @property
    def bounds_itself(self) -> bool:
        """An `async def` tool cancels itself at its timeout (no thread is left running)."""
        return inspect.iscoroutinefunction(self.function)

    def __reduce__(self) -> tuple[Any, ...]:
        ref = _import_path(self.function)
        try:
            same = ref is not None and resolve_function_tool(ref).function is self.function
        except Exception:
            same = False
        if ref is None or not same:
            raise pickle.PicklingError(
                f"tool {self.name}: its function is not reachable by its import path "
                "(define it at module level)"
            )
        return (resolve_function_tool, (ref,))


def _check_parameter(fn_name: str, param: inspect.Parameter) -> None:
    if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        raise ToolDefinitionError(
            f"function {fn_name}: *{param.name} cannot become a tool argument; name each one"
        )
    if param.kind is inspect.Parameter.POSITIONAL_ONLY:
        raise ToolDefinitionError(
            f"function {fn_name}: positional-only parameter {param.name} cannot be named by "
            "the model; make it a normal parameter"
        )


def _args_model(
    fn: Callable[..., Any], fn_name: str, arg_docs: Mapping[str, str]
) -> tuple[type[FunctionArgs], tuple[str, ...], str | None]:
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(
            f"function {fn_name}: its type hints cannot be resolved ({type(exc).__name__}: {exc})"
        ) from None
    fields: dict[str, Any] = {}
    params: list[str] = []
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        _check_parameter(fn_name, param)
        if param.name not in hints:
            raise ToolDefinitionError(
                f"function {fn_name}: parameter {param.name} has no type hint (the model needs "
                f"its type: e.g. {param.name}: str)"
            )
        hint = hints[param.name]
        if hint is ToolContext:
            context_param = param.name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        if isinstance(default, FieldInfo):  # `limit: int = Field(3, ge=1)`: its own field
            doc = arg_docs.get(param.name)
            if default.description is None and doc is not None:
                default = FieldInfo.merge_field_infos(default, description=doc)
            fields[param.name] = (hint, default)
        else:
            fields[param.name] = (hint, Field(default, description=arg_docs.get(param.name)))
        params.append(param.name)
    model_name = "".join(part.title() for part in fn_name.split("_")) + "Args"
    try:
        model = create_model(model_name, __base__=FunctionArgs, **fields)
        model.model_json_schema()  # a type pydantic cannot describe fails here, not mid-turn
    except Exception as exc:
        raise ToolDefinitionError(
            f"function {fn_name}: its arguments cannot form a JSON schema "
            f"({type(exc).__name__}: {str(exc).splitlines()[0]})"
        ) from None
    model._tool_ref = _import_path(fn)
    return model, tuple(params), context_param


class ToolOptions(TypedDict, total=False):
    """`function_tool`'s keywords (and their defaults there), as `@tool(...)` takes them."""

    name: str | None
    description: str | None
    replay_safe: bool
    requires_approval: bool
    timeout_seconds: float | None
    isolation: Isolation


def function_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    replay_safe: bool = False,
    requires_approval: bool = False,
    timeout_seconds: float | None = None,
    isolation: Isolation = "process",
) -> FunctionTool:
    """`fn` as a tool (see the module docstring); ToolDefinitionError when it cannot be one."""
    if isinstance(fn, FunctionTool):
        fn = fn.function
    if not callable(fn):
        raise ToolDefinitionError(f"a tool needs a function, got {type(fn).__name__}")
    fn_name = getattr(fn, "__name__", type(fn).__name__)
    tool_name = fn_name if name is None else name
    problem = tool_name_problem(tool_name)
    if problem is not None:
        raise ToolDefinitionError(problem)
    if timeout_seconds is not None and not timeout_seconds > 0:
        raise ToolDefinitionError(f"tool {tool_name}: timeout_seconds must be > 0")
    if isolation not in ("process", "in_process"):
        raise ToolDefinitionError(
            f"tool {tool_name}: isolation must be 'process' or 'in_process', not {isolation!r}"
        )
    text, arg_docs = parse_docstring(getattr(fn, "__doc__", None))
    args_model, params, context_param = _args_model(fn, fn_name, arg_docs)
    return FunctionTool(
        fn,
        name=tool_name,
        description=description if description is not None else (text or tool_name),
        args_model=args_model,
        handler=_Handler(fn, tool_name, params, context_param, timeout_seconds),
        replay_safe=replay_safe,
        isolation=isolation,
        requires_approval=requires_approval,
        timeout_seconds=timeout_seconds,
    )


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(**options: Unpack[ToolOptions]) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a function a tool: `@tool` or `@tool(requires_approval=True, ...)`.

    `replay_safe`: re-running a call whose outcome is unknown (a crash mid-call) is harmless.
    `requires_approval`: every call waits for a person's decision. `timeout_seconds`: the call's
    limit in every runner (None: the runner's). `isolation`: `"process"` (a worker process the
    local server can kill) or `"in_process"`. The decorated name still calls the function.
    """

    def make(function: Callable[..., Any]) -> FunctionTool:
        return function_tool(function, **options)

    return make(fn) if fn is not None else make
