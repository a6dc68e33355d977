"""The argument model of an MCP tool: any JSON object, checked against the server's inputSchema.

`Tool.args_model` must be a pydantic model. An MCP server describes its arguments with a JSON
schema instead, so each listed tool gets a subclass of `McpArguments` that keeps the arguments
exactly as given (no coercion: the server receives what the model sent), reports the server's
schema as its own JSON schema (what the model is shown) and validates against it with
`jsonschema` (a dependency of `mcp`), so a call that breaks the schema is a tool error result the
model can correct before anything is sent. A schema that is itself invalid is not enforced here
(the server still validates).
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, create_model, model_validator
from pydantic_core import PydanticCustomError

MAX_SCHEMA_ERRORS = 8


class McpArguments(BaseModel):
    """Arguments of one MCP tool call; subclasses carry the tool's input schema."""

    model_config = ConfigDict(extra="allow", frozen=True)

    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    validator: ClassVar[Any] = None
    """A `jsonschema` validator of `input_schema`, or None when the schema is not enforced."""

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The server's inputSchema, as listed."""
        return copy.deepcopy(cls.input_schema)

    @model_validator(mode="before")
    @classmethod
    def _matches_schema(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise _schema_error(f"the arguments must be a JSON object, not {type(data).__name__}")
        if cls.validator is not None:
            errors = sorted(cls.validator.iter_errors(data), key=lambda e: list(e.absolute_path))
            if errors:
                raise _schema_error(_describe(errors))
        return data

    def arguments(self) -> dict[str, Any]:
        """The arguments as sent by the model, for the server."""
        return dict(self.model_extra or {})


def arguments_model(tool_name: str, input_schema: object) -> type[McpArguments]:
    """A `McpArguments` subclass for `tool_name` whose schema is `input_schema`."""
    schema = input_schema if isinstance(input_schema, dict) else {"type": "object"}
    model = create_model(f"{tool_name}_arguments", __base__=McpArguments)
    model.input_schema = copy.deepcopy(schema)
    model.validator = _validator(schema)
    return model


def _validator(schema: dict[str, Any]) -> Any:
    from jsonschema import exceptions, validators

    kind = validators.validator_for(schema)
    try:
        kind.check_schema(schema)
    except exceptions.SchemaError:
        return None
    return kind(schema)


def _schema_error(text: str) -> PydanticCustomError:
    # A custom error's message is the text itself (a ValueError's would read "Value error, ...").
    return PydanticCustomError("mcp_input_schema", "{text}", {"text": text})


def _describe(errors: list[Any]) -> str:
    parts = []
    for error in errors[:MAX_SCHEMA_ERRORS]:
        where = ".".join(str(p) for p in error.absolute_path)
        # The registry already names the arguments as a whole: only nested errors get a path.
        parts.append(f"{where}: {_short(error.message)}" if where else _short(error.message))
    if len(errors) > MAX_SCHEMA_ERRORS:
        parts.append(f"... and {len(errors) - MAX_SCHEMA_ERRORS} more")
    return "; ".join(parts)


def _short(message: str, limit: int = 200) -> str:
    # jsonschema quotes the offending value whole; a long one would drown the message.
    return message if len(message) <= limit else message[: limit - 3] + "..."
