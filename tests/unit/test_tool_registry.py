"""The tool registry: registration, specs, and argument validation into model-visible errors."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from turnkeep.tools.base import Tool, ToolContext, ToolResult
from turnkeep.tools.builtin import CALCULATOR, ECHO, builtin_tools, evaluate
from turnkeep.tools.registry import ToolRegistry, ToolRegistryError

CTX = ToolContext(session_id="s", user_id="u", operation_id="op", call_id="c1")


class AddArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    b: int


def _add(args: AddArgs, _ctx: ToolContext) -> ToolResult:
    return ToolResult(str(args.a + args.b))


def _boom(_args: AddArgs, _ctx: ToolContext) -> ToolResult:
    raise RuntimeError("disk on fire")


ADD = Tool("add", "Add two integers.", AddArgs, _add, replay_safe=True)


def test_specs_list_every_tool_with_its_json_schema_in_registration_order() -> None:
    registry = ToolRegistry([ADD, ECHO])

    specs = registry.specs()

    assert [s.name for s in specs] == ["add", "echo"]
    assert specs[0].description == "Add two integers."
    assert specs[0].input_schema["properties"]["a"]["type"] == "integer"
    assert specs[0].input_schema["required"] == ["a", "b"]


def test_valid_arguments_run_the_handler() -> None:
    assert ToolRegistry([ADD]).run_call("add", '{"a": 2, "b": 3}', CTX) == ToolResult("5")


def test_empty_argument_text_means_an_empty_object() -> None:
    result = ToolRegistry(builtin_tools(clock=lambda: 0.0)).run_call("clock_now", "", CTX)

    assert result == ToolResult("1970-01-01T00:00:00+00:00")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": 2', "are not valid JSON"),
        ("[1, 2]", "must be a JSON object, got list"),
        ('{"a": "x", "b": 1}', "invalid arguments for add: a: Input should be a valid integer"),
        ('{"a": 1}', "invalid arguments for add: b: Field required"),
        ('{"a": 1, "b": 2, "c": 3}', "c: Extra inputs are not permitted"),
    ],
)
def test_bad_arguments_become_an_error_result_naming_the_problem(
    arguments: str, expected: str
) -> None:
    result = ToolRegistry([ADD]).run_call("add", arguments, CTX)

    assert result.is_error
    assert expected in result.content


def test_an_unknown_tool_is_an_error_result_listing_the_available_tools() -> None:
    result = ToolRegistry([ADD, ECHO]).run_call("nope", "{}", CTX)

    assert result.is_error
    assert result.content == "Error: unknown tool 'nope'. Available tools: add, echo."


def test_a_handler_exception_becomes_an_error_result_not_a_crash() -> None:
    registry = ToolRegistry([Tool("boom", "Explodes.", AddArgs, _boom)])

    result = registry.run_call("boom", '{"a": 1, "b": 2}', CTX)

    assert result == ToolResult("Error: tool boom failed: RuntimeError: disk on fire", True)


def test_duplicate_and_malformed_names_are_rejected_at_registration() -> None:
    registry = ToolRegistry([ADD])

    with pytest.raises(ToolRegistryError, match="already registered"):
        registry.register(ADD)
    with pytest.raises(ToolRegistryError, match="'bad name' is invalid"):
        registry.register(Tool("bad name", "x", AddArgs, _add))


def test_replay_safety_is_read_from_the_tool_declaration() -> None:
    unsafe = Tool("unsafe", "x", AddArgs, _add, replay_safe=False)
    registry = ToolRegistry([ADD, unsafe])

    assert registry.is_replay_safe("add")
    assert not registry.is_replay_safe("unsafe")
    assert not registry.is_replay_safe("missing")


@pytest.mark.parametrize(
    ("expression", "expected"),
    [("(2+3)*4", "20"), ("2**10", "1024"), ("-7 // 2", "-4"), ("1/4", "0.25")],
)
def test_calculator_evaluates_plain_arithmetic(expression: str, expected: str) -> None:
    result = ToolRegistry([CALCULATOR]).run_call(
        "calculator", f'{{"expression": "{expression}"}}', CTX
    )

    assert result == ToolResult(expected)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("__import__('os')", "unsupported element Call"),
        ("1/0", "division by zero"),
        ("2**1000", "exponent 1000 is too large"),
        ("1 +", "not an arithmetic expression"),
    ],
)
def test_calculator_rejects_anything_but_arithmetic_with_a_clear_error(
    expression: str, expected: str
) -> None:
    result = CALCULATOR.handler(CALCULATOR.args_model(expression=expression), CTX)

    assert result.is_error
    assert expected in result.content


def test_evaluate_keeps_integer_results_exact() -> None:
    assert evaluate("10**20 + 1") == 100000000000000000001


def test_a_handler_returning_non_text_content_becomes_an_error_result_not_a_crash() -> None:
    def numeric(_args: AddArgs, _ctx: ToolContext) -> ToolResult:
        return ToolResult(42)  # type: ignore[arg-type]

    registry = ToolRegistry([Tool("numeric", "Returns a number.", AddArgs, numeric)])

    result = registry.run_call("numeric", '{"a": 1, "b": 2}', CTX)

    assert result.is_error
    assert result.content == "Error: tool numeric returned content of type int, not text"


@pytest.mark.timeout(10)  # before the bound, the first case computed for ~16 s holding the GIL
@pytest.mark.parametrize(
    "expression",
    [
        "(((9**64)**64)**64)**64",
        "(9**64)**64",
        "(2**64)**64",
        "*".join(["10**64"] * 24),
        "-(((9**64)**64)**64)",
        "1e300**2",
    ],
)
def test_calculator_refuses_a_too_large_result_before_computing_it(expression: str) -> None:
    result = CALCULATOR.handler(CALCULATOR.args_model(expression=expression), CTX)

    assert result.is_error
    assert "too large" in result.content or "limit is 4096 bits" in result.content


def test_calculator_still_computes_results_just_under_the_size_limit() -> None:
    assert evaluate("(2**64)**63") == 2 ** (64 * 63)
    assert evaluate("(10**60)*(10**60)") == 10**120


def test_calculator_refuses_a_complex_result() -> None:
    result = CALCULATOR.handler(CALCULATOR.args_model(expression="(-8)**0.5"), CTX)

    assert result.is_error
    assert "not a real number" in result.content
