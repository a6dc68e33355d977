"""Typed results: what a turn must end with when its agent (or the turn) names an output type.

The model submits the result by calling the `final_result` tool, whose input schema is the
output's JSON schema. A schema that is not a JSON object (a list, a union, a scalar) is offered
wrapped as `{"result": <value>}`, because providers take only object schemas as tool input;
the stored output is the unwrapped value either way. docs/agent.md, "Typed results".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError

FINAL_RESULT_TOOL: Final = "final_result"
"""The tool a typed turn's result arrives through (a reserved tool name)."""
FINAL_RESULT_DESCRIPTION: Final = (
    "Submit the turn's final result. Call this exactly once, when you are done, with the "
    "result as the arguments; the turn ends when the result is valid."
)
DEFAULT_OUTPUT_RETRIES: Final = 2
MAX_OUTPUT_SCHEMA_BYTES: Final = 16_384
"""The cap on a turn's `output_schema` (its compact JSON text, UTF-8)."""
MAX_OUTPUT_BYTES: Final = 65_536
"""The cap on a result (its compact JSON text, UTF-8): it rides in step payloads and events,
so a longer one is an error the model sees, never a cut value."""
MAX_OUTPUT_ERRORS: Final = 20
"""Errors named in one tool error result (the count of the rest is said)."""
WRAPPER_KEY: Final = "result"
OUTPUT_INVALID: Final = "output_invalid"
"""The error code of a turn whose result stayed invalid past `output_retries`."""


class OutputInvalidError(ValueError):
    """A submitted result did not validate; `errors` names each problem in one line."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors: tuple[str, ...] = tuple(errors)

    def tool_text(self) -> str:
        """The tool error result the model sees: each error on its own line."""
        shown = list(self.errors[:MAX_OUTPUT_ERRORS])
        if len(self.errors) > MAX_OUTPUT_ERRORS:
            shown.append(f"... and {len(self.errors) - MAX_OUTPUT_ERRORS} more")
        lines = "\n".join(f"- {e}" for e in shown)
        return (
            f"the result is invalid ({len(self.errors)} error(s)):\n{lines}\n"
            f"call {FINAL_RESULT_TOOL} again with a corrected result"
        )


class OutputSchemaError(ValueError):
    """A JSON Schema given as a turn's `output_schema` is not accepted; `str()` says why."""


def _is_object_schema(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "object" and not any(
        k in schema for k in ("anyOf", "oneOf", "allOf", "$ref")
    )


def _wrapped(schema: dict[str, Any]) -> dict[str, Any]:
    inner = dict(schema)
    defs = inner.pop("$defs", None)
    out: dict[str, Any] = {
        "type": "object",
        "properties": {WRAPPER_KEY: inner},
        "required": [WRAPPER_KEY],
        "additionalProperties": False,
    }
    if defs is not None:
        out["$defs"] = defs  # $ref paths (#/$defs/...) stay valid at the top
    return out


def _loc(loc: tuple[int | str, ...] | list[Any], wrapped: bool) -> str:
    parts = [str(p) for p in loc]
    if wrapped and parts[:1] == [WRAPPER_KEY]:
        parts = parts[1:]
    return ".".join(parts) or "(the result)"


class OutputSpec:
    """One output shape: the `final_result` tool schema and the validation of a submission.

    `schema` is the output's JSON Schema; `tool_schema` is what the tool offers (wrapped when
    the schema is not an object); `validate(arguments)` returns the JSON value to store or
    raises OutputInvalidError naming each error.
    """

    __slots__ = ("_adapter", "_validator", "schema", "tool_schema", "wrapped")

    def __init__(
        self,
        schema: dict[str, Any],
        *,
        adapter: TypeAdapter[Any] | None = None,
        validator: Any = None,
    ) -> None:
        self.schema = schema
        self.wrapped = not _is_object_schema(schema)
        self.tool_schema = _wrapped(schema) if self.wrapped else schema
        self._adapter = adapter
        self._validator = validator

    @classmethod
    def from_type(cls, output_type: Any) -> OutputSpec:
        """The spec of a Python type pydantic's TypeAdapter takes (model, TypedDict,
        dataclass, list, union); TypeError/ValueError when it cannot build a schema."""
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        return cls(adapter.json_schema(), adapter=adapter)

    @classmethod
    def from_schema(cls, schema: object) -> OutputSpec:
        """The spec of a turn's JSON Schema: capped in size and checked against its
        metaschema (jsonschema); OutputSchemaError says what is wrong."""
        from jsonschema import SchemaError, validators

        if not isinstance(schema, dict):
            raise OutputSchemaError("output_schema must be a JSON object (a JSON Schema)")
        size = len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_OUTPUT_SCHEMA_BYTES:
            raise OutputSchemaError(
                f"output_schema is {size} bytes; the limit is {MAX_OUTPUT_SCHEMA_BYTES}"
            )
        validator_cls = validators.validator_for(schema)
        try:
            validator_cls.check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "(top)"
            raise OutputSchemaError(
                f"output_schema is not a valid JSON Schema at {where}: {exc.message}"
            ) from None
        return cls(schema, validator=validator_cls(schema))

    def validate(self, arguments: str) -> Any:
        """The JSON value a `final_result` call's arguments (JSON text) submit, validated."""
        try:
            data = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise OutputInvalidError([f"the arguments are not JSON: {exc}"]) from None
        if self.wrapped:
            if not isinstance(data, dict) or WRAPPER_KEY not in data:
                raise OutputInvalidError(
                    [f"the arguments must be an object with the key {WRAPPER_KEY!r}"]
                )
            extra = sorted(set(data) - {WRAPPER_KEY})
            if extra:
                raise OutputInvalidError([f"unexpected key(s): {', '.join(extra)}"])
            data = data[WRAPPER_KEY]
        value = (
            self._validate_python(data)
            if self._adapter is not None
            else self._validate_schema(data)
        )
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_OUTPUT_BYTES:
            raise OutputInvalidError(
                [f"the result is {size} bytes of JSON; the limit is {MAX_OUTPUT_BYTES}"]
            )
        return value

    def _validate_python(self, data: Any) -> Any:
        assert self._adapter is not None
        try:
            obj = self._adapter.validate_python(data)
        except ValidationError as exc:
            raise OutputInvalidError(
                [f"{_loc(e['loc'], False)}: {e['msg']}" for e in exc.errors()]
            ) from None
        return self._adapter.dump_python(obj, mode="json")

    def _validate_schema(self, data: Any) -> Any:
        errors = sorted(self._validator.iter_errors(data), key=lambda e: list(e.path))
        if errors:
            raise OutputInvalidError([f"{_loc(list(e.path), False)}: {e.message}" for e in errors])
        return data


def output_spec(output_type: object) -> OutputSpec | None:
    """An agent's `output_type` as a spec (None: the turn ends with text)."""
    if output_type is None:
        return None
    if isinstance(output_type, OutputSpec):
        return output_type
    return OutputSpec.from_type(output_type)
