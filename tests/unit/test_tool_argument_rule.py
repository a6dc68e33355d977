"""One argument rule for function tools and MCP tools (docs/agent.md, "Arguments"): JSON values
are taken as the types they are, never coerced, and a function tool refuses unknown fields at
every depth of its arguments, nested models included."""

from __future__ import annotations

import json

import pytest

from tests.support import function_tools as ft
from turnkeep import Tool, ToolContext, tool
from turnkeep.mcp.arguments import arguments_model
from turnkeep.tools.base import ToolResult
from turnkeep.tools.registry import ToolRegistry

CTX = ToolContext("s-1", "u-1", "op-1", "call-1")


@tool
def stock(name: str, qty: int) -> str:
    """Record a stock level."""
    return f"{name}={qty}"


def _mcp_stock() -> Tool:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "qty": {"type": "integer"}},
        "required": ["name", "qty"],
    }
    model = arguments_model("pantry_stock", schema)
    return Tool(
        name="pantry_stock",
        description="Record a stock level.",
        args_model=model,
        handler=lambda args, _ctx: ToolResult(json.dumps(args.arguments())),
    )


def _run(t: Tool, arguments: dict[str, object]) -> tuple[str, bool]:
    result = ToolRegistry([t]).run_call(t.name, json.dumps(arguments), CTX)
    return result.content, result.is_error


def test_an_unknown_field_inside_a_nested_model_argument_is_refused() -> None:
    text, error = _run(
        ft.order_summary, {"customer": "ann", "lines": [{"sku": "a", "colour": "red"}]}
    )

    assert error
    assert "lines.0.colour: Extra inputs are not permitted" in text


def test_the_schema_the_model_is_shown_closes_every_nested_model() -> None:
    schema = ft.order_summary.spec().input_schema

    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Line"]["additionalProperties"] is False


@pytest.mark.parametrize("make", [lambda: stock, _mcp_stock], ids=["function", "mcp"])
@pytest.mark.parametrize(
    ("arguments", "field"),
    [({"name": "rice", "qty": "3"}, "qty"), ({"name": 42, "qty": 3}, "name")],
    ids=["string-for-integer", "number-for-string"],
)
def test_a_value_of_the_wrong_json_type_is_refused_by_function_and_mcp_tools_alike(
    make: object, arguments: dict[str, object], field: str
) -> None:
    text, error = _run(make(), arguments)  # type: ignore[operator]

    assert error
    assert text.startswith("Error: invalid arguments for ")
    assert field in text


@pytest.mark.parametrize("make", [lambda: stock, _mcp_stock], ids=["function", "mcp"])
def test_values_of_the_schemas_types_pass_unchanged(make: object) -> None:
    text, error = _run(make(), {"name": "rice", "qty": 3})  # type: ignore[operator]

    assert not error
    assert text in ("rice=3", '{"name": "rice", "qty": 3}')


def test_strings_stay_valid_for_enums_and_literals() -> None:
    text, error = _run(
        ft.order_summary,
        {"customer": "ann", "lines": [{"sku": "a", "qty": 2}], "size": "large", "speed": "express"},
    )

    assert not error, text
    assert json.loads(text)["size"] == "large"
