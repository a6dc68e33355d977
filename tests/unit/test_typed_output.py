"""Typed results: an agent's `output_type` (through pydantic's TypeAdapter) or a turn's JSON
Schema becomes the `final_result` tool's schema, and a submission validates into the JSON value
the turn stores, or fails naming each error (docs/agent.md, "Typed results")."""

from __future__ import annotations

import dataclasses
import json
from typing import Literal

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs it for a TypedDict on Python < 3.12

from turnkeep import Agent
from turnkeep.agent import AgentDefinitionError
from turnkeep.agent.output import (
    MAX_OUTPUT_SCHEMA_BYTES,
    OutputInvalidError,
    OutputSchemaError,
    OutputSpec,
)


class Verdict(BaseModel):
    label: Literal["bug", "feature"]
    confidence: float


class Refusal(BaseModel):
    reason: str


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Span:
    start: int
    end: int


def test_a_model_output_is_offered_as_its_own_object_schema_and_validates_to_json() -> None:
    spec = Agent(output_type=Verdict).output
    assert spec is not None

    assert spec.tool_schema == Verdict.model_json_schema()
    assert spec.validate('{"label": "bug", "confidence": 0.5}') == {
        "label": "bug",
        "confidence": 0.5,
    }


@pytest.mark.parametrize(
    ("output_type", "value"),
    [
        (Point, {"x": 1, "y": 2}),
        (Span, {"start": 0, "end": 3}),
    ],
)
def test_a_typeddict_or_dataclass_output_validates_like_a_model(
    output_type: object, value: object
) -> None:
    spec = OutputSpec.from_type(output_type)

    assert spec.wrapped is False
    assert spec.validate(json.dumps(value)) == value


def test_a_list_or_union_output_is_offered_wrapped_in_result_and_stored_unwrapped() -> None:
    listed = OutputSpec.from_type(list[Point])
    union = OutputSpec.from_type(Verdict | Refusal)

    assert listed.tool_schema["required"] == ["result"]
    assert listed.tool_schema["properties"]["result"]["type"] == "array"
    assert listed.validate('{"result": [{"x": 1, "y": 2}]}') == [{"x": 1, "y": 2}]
    assert "$defs" in union.tool_schema  # the $refs of the union's members still resolve
    assert union.validate('{"result": {"reason": "no"}}') == {"reason": "no"}


def test_an_invalid_result_names_each_error_by_its_place() -> None:
    spec = OutputSpec.from_type(Verdict)

    with pytest.raises(OutputInvalidError) as caught:
        spec.validate('{"label": "question"}')

    assert len(caught.value.errors) == 2
    assert caught.value.errors[0].startswith("label: ")
    assert caught.value.errors[1].startswith("confidence: Field required")
    text = caught.value.tool_text()
    assert "2 error(s)" in text
    assert "- label: " in text
    assert "final_result" in text


def test_arguments_that_are_not_json_are_one_error_saying_so() -> None:
    with pytest.raises(OutputInvalidError) as caught:
        OutputSpec.from_type(Verdict).validate('{"label": ')

    assert caught.value.errors[0].startswith("the arguments are not JSON")


def test_a_turns_json_schema_is_checked_and_validates_submissions() -> None:
    spec = OutputSpec.from_schema(
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    )

    assert spec.validate('{"n": 3}') == {"n": 3}
    with pytest.raises(OutputInvalidError) as caught:
        spec.validate('{"n": "three"}')
    assert caught.value.errors == ("n: 'three' is not of type 'integer'",)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ([1], "must be a JSON object"),
        ({"type": "objekt"}, "not a valid JSON Schema at type"),
        (
            {"type": "object", "description": "x" * MAX_OUTPUT_SCHEMA_BYTES},
            f"the limit is {MAX_OUTPUT_SCHEMA_BYTES}",
        ),
    ],
)
def test_a_bad_turn_schema_is_refused_with_the_reason(schema: object, message: str) -> None:
    with pytest.raises(OutputSchemaError, match=message):
        OutputSpec.from_schema(schema)


def test_output_retries_default_to_two() -> None:
    assert Agent(output_type=Verdict).output_retries == 2


def test_a_turn_schema_is_refused_unless_the_agents_turn_settings_allow_it() -> None:
    schema = {"type": "object"}

    with pytest.raises(ValueError, match="does not let a turn set it"):
        Agent(output_type=Verdict).turn_output(schema)
    allowed = Agent(turn_settings=["max_tokens", "output_schema"])
    turn = allowed.turn_output(schema)
    assert turn is not None
    assert turn.schema == schema
    assert allowed.turn_output(None) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"output_type": object()}, "output_type .* has no JSON schema"),
        ({"output_retries": -1}, "output_retries must be a whole number"),
        ({"output_retries": True}, "output_retries must be a whole number"),
    ],
)
def test_a_bad_output_definition_is_one_line(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(AgentDefinitionError, match=message):
        Agent(**kwargs)  # type: ignore[arg-type]


def test_a_function_tool_may_not_take_the_final_result_name() -> None:
    def final_result() -> str:
        """Not allowed."""
        return "x"

    with pytest.raises(AgentDefinitionError, match="typed result is submitted through"):
        Agent(tools=[final_result])
