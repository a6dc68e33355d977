"""The tool-source conformance suite: function tools and MCP servers (Streamable HTTP and
stdio) list the same tools with the same schema and answer calls, bad arguments and failures
the same way (docs/agent.md, docs/mcp.md). Each source offers `lookup` and `fail`
(tests/conformance/tool_sources/__init__.py)."""

from __future__ import annotations

import json

import pytest

from tests.conformance.tool_sources import ToolSourceHarness
from turnkeep.tools.base import ToolContext, ToolResult
from turnkeep.tools.registry import ToolRegistry
from turnkeep.tools.sources import ToolSourceError

CTX = ToolContext("s1", "u1", "op1", "call1")


def call(
    harness: ToolSourceHarness, registry: ToolRegistry, tool: str, arguments: str
) -> ToolResult:
    return registry.run_call(harness.prefix + tool, arguments, CTX)


def test_a_source_lists_its_tools_with_their_descriptions_and_schemas(
    tool_source: ToolSourceHarness,
) -> None:
    registry = tool_source.registry()
    specs = {spec.name: spec for spec in registry.specs()}

    assert sorted(specs) == [tool_source.prefix + "fail", tool_source.prefix + "lookup"]
    lookup = specs[tool_source.prefix + "lookup"]
    assert lookup.description == "Look a term up in the knowledge base."
    schema = lookup.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["term"]
    assert schema["properties"]["term"]["type"] == "string"
    assert schema["properties"]["limit"]["type"] == "integer"
    assert schema["properties"]["limit"]["default"] == 2


def test_a_call_answers_with_the_tools_text(tool_source: ToolSourceHarness) -> None:
    registry = tool_source.registry()

    result = call(tool_source, registry, "lookup", json.dumps({"term": "rollback", "limit": 5}))

    assert result == ToolResult("rollback: 5 entries")


def test_a_left_out_argument_takes_its_default(tool_source: ToolSourceHarness) -> None:
    result = call(tool_source, tool_source.registry(), "lookup", '{"term": "x"}')

    assert result == ToolResult("x: 2 entries")


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ("{}", "term"),
        ('{"term": "x", "limit": "many"}', "limit"),
        ('{"term": ["not", "a", "string"]}', "term"),
    ],
)
def test_arguments_against_the_schema_are_an_error_result_naming_the_field(
    tool_source: ToolSourceHarness, arguments: str, named: str
) -> None:
    result = call(tool_source, tool_source.registry(), "lookup", arguments)

    assert result.is_error
    assert named in result.content


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", '"term"'])
def test_arguments_that_are_not_a_json_object_are_an_error_result(
    tool_source: ToolSourceHarness, arguments: str
) -> None:
    result = call(tool_source, tool_source.registry(), "lookup", arguments)

    assert result.is_error
    assert result.content.startswith("Error")


def test_a_tool_that_raises_is_an_error_result_naming_it(tool_source: ToolSourceHarness) -> None:
    # What the text says past the name is the source's: the MCP SDK's server hides an
    # unexpected exception's message ("Error executing tool fail"), a function tool's is kept.
    result = call(tool_source, tool_source.registry(), "fail", '{"reason": "disk on fire"}')

    assert result.is_error
    assert tool_source.prefix + "fail" in result.content


def test_an_unknown_tool_is_an_error_result_naming_it(tool_source: ToolSourceHarness) -> None:
    result = call(tool_source, tool_source.registry(), "nope", "{}")

    assert result.is_error
    assert tool_source.prefix + "nope" in result.content


def test_a_source_that_cannot_be_reached_fails_its_listing_with_an_error_naming_it(
    remote_tool_source: ToolSourceHarness,
) -> None:
    assert remote_tool_source.unreachable is not None
    name = remote_tool_source.prefix.rstrip("_")

    with pytest.raises(ToolSourceError) as raised:
        remote_tool_source.unreachable()

    assert raised.value.source == name
    assert repr(name) in str(raised.value)
