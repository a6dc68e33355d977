"""Plain functions as tools: the schema comes from the type hints, the texts from the docstring,
the return value becomes the result text, failures and timeouts become tool error results, in
every runner (in-process and the local worker pool, which pickles decorated functions)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support import function_tools as ft
from turnkeep import Tool, ToolContext, tool
from turnkeep.agent import ToolDefinitionError, function_tool
from turnkeep.tools.isolation import InProcessRunner, ProcessPoolRunner
from turnkeep.tools.registry import ToolRegistry

CTX = ToolContext("s-1", "u-1", "op-1", "call-7")


def _call(t: Tool, arguments: dict[str, object], runner: object = None) -> tuple[str, bool]:
    result = ToolRegistry([t]).run_call(t.name, json.dumps(arguments), CTX, runner)  # type: ignore[arg-type]
    return result.content, result.is_error


def test_a_decorated_function_becomes_a_tool_named_and_described_by_the_function() -> None:
    t = ft.order_summary
    spec = t.spec()

    assert isinstance(t, Tool)
    assert spec.name == "order_summary"
    assert spec.description == "Summarise an order for a customer. The summary counts the items."
    props = spec.input_schema["properties"]
    assert props["customer"]["description"] == "Who orders, by name."
    assert props["lines"]["description"] == "The order lines."
    assert props["speed"] == {
        "default": "standard",
        "description": "How fast it ships.",
        "enum": ["standard", "express"],
        "title": "Speed",
        "type": "string",
    }
    assert spec.input_schema["required"] == ["customer", "lines"]
    assert spec.input_schema["additionalProperties"] is False
    assert spec.input_schema["$defs"]["Line"]["required"] == ["sku"]
    assert spec.input_schema["$defs"]["Size"]["enum"] == ["small", "large"]
    assert props["gift"]["anyOf"] == [{"type": "boolean"}, {"type": "null"}]
    assert ft.order_summary("ann", [ft.Line(sku="a")])["items"] == 1  # still callable


def test_the_return_value_becomes_json_text_and_arguments_are_validated_into_models() -> None:
    text, error = _call(
        ft.order_summary, {"customer": "ann", "lines": [{"sku": "a", "qty": 3}, {"sku": "b"}]}
    )

    assert not error
    assert json.loads(text) == {
        "customer": "ann",
        "items": 4,
        "size": "small",
        "gift": None,
        "speed": "standard",
    }
    text, error = _call(ft.order_summary, {"customer": "ann", "lines": [], "speed": "rocket"})
    assert error
    assert "speed" in text
    assert "'standard' or 'express'" in text
    text, error = _call(ft.order_summary, {"customer": "ann", "lines": [], "colour": "red"})
    assert error
    assert "colour: Extra inputs are not permitted" in text


def test_a_bare_function_in_a_list_is_a_tool_with_its_defaults() -> None:
    t = function_tool(ft.bare_add)

    assert t.spec().input_schema["properties"]["b"]["default"] == 2
    assert _call(t, {"a": 40}) == ("42", False)


def test_an_exception_and_an_unserialisable_result_become_error_results_the_model_sees() -> None:
    assert _call(ft.fails, {"reason": "disk full"}) == (
        "Error: tool fails failed: RuntimeError: disk full",
        True,
    )
    text, error = _call(ft.not_json, {})
    assert error
    assert text.startswith("Error: tool not_json returned object, which is not text")


def test_an_async_function_runs_and_gets_the_call_context_outside_its_schema() -> None:
    assert "ctx" not in ft.async_double.spec().input_schema["properties"]
    assert _call(ft.async_double, {"n": 21}) == ("42 (call call-7)", False)
    assert _call(ft.async_double, {"n": 21}, InProcessRunner()) == ("42 (call call-7)", False)


@pytest.mark.parametrize("t", [ft.slow_sync, ft.slow_async], ids=["sync", "async"])
def test_a_call_past_its_timeout_ends_as_a_tool_error_in_process(t: Tool) -> None:
    text, error = _call(t, {"seconds": 5}, InProcessRunner())

    assert error
    assert "did not finish within its limit of 0.3 s" in text
    assert _call(t, {"seconds": 0}, InProcessRunner()) == ("woke", False)


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolRunner]:
    runner = ProcessPoolRunner(workers=1, timeout_seconds=30)
    yield runner
    runner.close()


def test_decorated_module_level_functions_run_in_the_worker_pool(pool: ProcessPoolRunner) -> None:
    assert _call(ft.async_double, {"n": 5}, pool) == ("10 (call call-7)", False)
    text, error = _call(ft.order_summary, {"customer": "bo", "lines": [{"sku": "x"}]}, pool)
    assert not error
    assert json.loads(text)["items"] == 1
    assert _call(function_tool(ft.bare_add), {"a": 1}, pool) == ("3", False)


def test_the_tools_own_timeout_applies_in_the_worker_pool(pool: ProcessPoolRunner) -> None:
    text, error = _call(ft.slow_sync, {"seconds": 10}, pool)

    assert error
    assert "did not finish within its limit of 0.3 s" in text
    assert "worker process was killed" in text


def test_a_function_defined_in_a_function_says_it_cannot_cross_to_a_worker(
    pool: ProcessPoolRunner,
) -> None:
    @tool
    def local(x: int) -> int:
        """Local."""
        return x

    text, error = _call(local, {"x": 1}, pool)

    assert error
    assert "cannot run in a worker process" in text
    assert _call(local, {"x": 1}) == ("1", False)  # in-process it runs


def _no_hint(x):  # type: ignore[no-untyped-def]
    return x


def _star(*names: str) -> str:
    return ""


@pytest.mark.parametrize(
    ("fn", "options", "problem"),
    [
        (_no_hint, {}, "function _no_hint: parameter x has no type hint"),
        (_star, {}, "function _star: *names cannot become a tool argument"),
        (ft.bare_add, {"name": "add two"}, "tool name 'add two' is invalid"),
        (ft.bare_add, {"timeout_seconds": 0}, "timeout_seconds must be > 0"),
    ],
)
def test_a_function_that_cannot_be_a_tool_is_one_clear_error(
    fn: object, options: dict[str, object], problem: str
) -> None:
    with pytest.raises(ToolDefinitionError) as raised:
        function_tool(fn, **options)  # type: ignore[arg-type]

    assert problem in str(raised.value)
    assert "\n" not in str(raised.value)
