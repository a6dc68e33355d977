"""Small built-in demo tools: `clock_now`, `calculator`, `echo` (all replay-safe, no I/O).

Each bounds its work before doing it. `clock_now` and `echo` are O(1) / capped text and run
in-process; `calculator` refuses results over MAX_INTEGER_BITS and may run in a worker process.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from turnkeep.tools.base import Tool, ToolContext, ToolResult

MAX_EXPRESSION_CHARS = 200
MAX_POWER_EXPONENT = 64
MAX_INTEGER_BITS = 4096
"""Largest integer result or intermediate (about 1,233 decimal digits)."""


class ClockNowArgs(BaseModel):
    """No arguments."""

    model_config = ConfigDict(extra="forbid")


class CalculatorArgs(BaseModel):
    """An arithmetic expression."""

    model_config = ConfigDict(extra="forbid")
    expression: str = Field(
        min_length=1,
        max_length=MAX_EXPRESSION_CHARS,
        description="Arithmetic with numbers, + - * / // % ** and parentheses, e.g. '(2+3)*4'.",
    )


class EchoArgs(BaseModel):
    """Text to echo back."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(max_length=4000, description="The text to return unchanged.")


def make_clock_now(clock: Callable[[], float] | None = None) -> Tool[ClockNowArgs]:
    """`clock_now`: the current UTC time in ISO 8601 (`clock` returns epoch seconds)."""
    import time

    now = clock or time.time

    def handler(_args: ClockNowArgs, _ctx: ToolContext) -> ToolResult:
        return ToolResult(datetime.fromtimestamp(now(), tz=UTC).isoformat(timespec="seconds"))

    return Tool(
        name="clock_now",
        description="Return the current date and time in UTC (ISO 8601).",
        args_model=ClockNowArgs,
        handler=handler,
        replay_safe=True,
        isolation="in_process",  # O(1); its handler closes over `clock`
    )


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


class CalculatorError(ValueError):
    """The expression is not plain arithmetic or cannot be evaluated."""


def evaluate(expression: str) -> int | float:
    """Evaluate plain arithmetic safely (no names, calls or attributes)."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {exc.msg}") from exc
    return _eval(tree.body)


def _eval(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        number: int | float = node.value  # type: ignore[assignment]
        return number
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_POWER_EXPONENT:
            raise CalculatorError(f"exponent {right} is too large (limit {MAX_POWER_EXPONENT})")
        _check_size(node.op, left, right)
        try:
            result = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError as exc:
            raise CalculatorError("division by zero") from exc
        except OverflowError as exc:
            raise CalculatorError(f"the result is too large for a number ({exc})") from exc
        if not isinstance(result, (int, float)):  # e.g. (-8) ** 0.5 is complex
            raise CalculatorError("the result is not a real number")
        return result
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))  # type: ignore[no-any-return]
    raise CalculatorError(f"unsupported element {type(node).__name__} in the expression")


def _bits(value: int | float) -> int:
    return value.bit_length() if isinstance(value, int) else 0


def _check_size(op: ast.operator, left: int | float, right: int | float) -> None:
    """Refuse an integer operation whose result would exceed MAX_INTEGER_BITS, before doing it.

    Big-integer arithmetic holds the GIL for as long as it runs, so the bound is computed from
    the operands' sizes (O(1)), never by trying. Float results are bounded by the float range.
    """
    if not (isinstance(left, int) and isinstance(right, int)):
        return
    a, b = _bits(left), _bits(right)
    if isinstance(op, (ast.Add, ast.Sub)):
        estimate = max(a, b) + 1
    elif isinstance(op, ast.Mult):
        estimate = a + b
    elif isinstance(op, ast.Pow) and right > 0 and abs(left) > 1:
        estimate = a * right
    else:  # division, modulo, x ** negative, 0/1/-1 ** n: never larger than the operands
        estimate = max(a, b)
    if estimate > MAX_INTEGER_BITS:
        raise CalculatorError(
            f"the result would have about {estimate} bits; the limit is {MAX_INTEGER_BITS} bits "
            f"(about {int(MAX_INTEGER_BITS * 0.30103)} decimal digits)"
        )


def _calculator(args: CalculatorArgs, _ctx: ToolContext) -> ToolResult:
    try:
        return ToolResult(repr(evaluate(args.expression)))
    except CalculatorError as exc:
        return ToolResult(f"Error: {exc}", is_error=True)


def _echo(args: EchoArgs, _ctx: ToolContext) -> ToolResult:
    return ToolResult(args.text)


CALCULATOR: Tool[CalculatorArgs] = Tool(
    name="calculator",
    description="Evaluate an arithmetic expression and return the number.",
    args_model=CalculatorArgs,
    handler=_calculator,
    replay_safe=True,
)

ECHO: Tool[EchoArgs] = Tool(
    name="echo",
    description="Return the given text unchanged.",
    args_model=EchoArgs,
    handler=_echo,
    replay_safe=True,
    isolation="in_process",  # returns at most 4000 characters it was given
)


def builtin_tools(clock: Callable[[], float] | None = None) -> list[Tool[Any]]:
    """The demo tools, in a stable order."""
    return [make_clock_now(clock), CALCULATOR, ECHO]
