"""Configuration errors as one line: the variable or flag, the bad value, and what is accepted.

`load_settings(cls)` builds a settings class from the environment and turns its
validation errors (and the JSON parse errors pydantic-settings raises for list fields) into a
`ConfigError`; the `turnkeep` command prints that line and exits with status 2.
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

CONFIG_EXIT_STATUS = 2
"""Exit status of the `turnkeep` command for a configuration error (as argparse uses)."""

S = TypeVar("S", bound=BaseModel)


class ConfigError(ValueError):
    """A configuration value is not accepted; `str()` is the one line to show."""


def config_line(name: str, value: object, accepted: str) -> str:
    """`NAME='value' is not accepted: expected <accepted>` (the value shown with repr)."""
    return config_problem(name, value, f"expected {accepted}")


def config_problem(name: str, value: object, problem: str) -> str:
    """`NAME='value' is not accepted: <problem>` (a problem that says what is accepted)."""
    return f"{name}={value!r} is not accepted: {problem}"


def accepted_values(info: FieldInfo) -> str:
    """What a settings field accepts, in words (type and bounds)."""
    kind = _kind(info.annotation)
    bounds = []
    for meta in info.metadata:
        if isinstance(meta, Ge):
            bounds.append(f">= {meta.ge}")
        elif isinstance(meta, Gt):
            bounds.append(f"> {meta.gt}")
        elif isinstance(meta, Le):
            bounds.append(f"<= {meta.le}")
        elif isinstance(meta, Lt):
            bounds.append(f"< {meta.lt}")
    text = kind + (" " + " and ".join(bounds) if bounds else "")
    if info.description:
        text += f" ({info.description.split(';')[0]})"  # its first clause: one short line
    return text


def _kind(annotation: Any) -> str:
    if annotation is bool:
        return "true or false"
    if annotation is int:
        return "an integer"
    if annotation is float:
        return "a number"
    if annotation is Path:
        return "a path"
    if annotation is str:
        return "a string"
    origin = typing.get_origin(annotation)
    if origin is list:
        return 'a JSON list of strings, e.g. ["scripted"]'
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_kind(a) for a in typing.get_args(annotation))
    return "a valid value"


def env_name(cls: type[BaseModel], field: str) -> str:
    """The environment variable of `field` (prefix + upper-case name): the prefix of a
    pydantic-settings class, or the `ENV_PREFIX` of a model read like one."""
    prefix = getattr(cls, "ENV_PREFIX", None) or dict(cls.model_config).get("env_prefix", "")
    return (str(prefix) + field).upper()


def load_settings(cls: type[S], environ: Mapping[str, str] | None = None) -> S:
    """`cls()` from the environment; ConfigError (one line) when a value is not accepted."""
    # Imported here: the step handlers load the agent through this module and never need
    # pydantic-settings (its import costs a cold start ~30 ms, docs/step-functions.md).
    from pydantic_settings import SettingsError

    env = os.environ if environ is None else environ
    try:
        return cls()
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first["loc"]
        field = str(loc[0]) if loc else ""
        info = cls.model_fields.get(field)
        nested = info.annotation if info is not None else None
        if isinstance(nested, type) and issubclass(nested, BaseModel):
            # A group read from flat variables (TurnkeepSettings.limits): name the field's own.
            if len(loc) < 2:
                raise ConfigError(f"configuration error: {first['msg']}") from None
            field = str(loc[1])
            info = nested.model_fields.get(field)
        name = env_name(cls, field)
        value = env.get(name, first.get("input"))
        accepted = accepted_values(info) if info is not None else first["msg"]
        raise ConfigError(config_line(name, value, accepted)) from None
    except SettingsError as exc:
        # pydantic-settings cannot decode a complex (JSON) value: its message names the field.
        for field, info in cls.model_fields.items():
            if f'"{field}"' in str(exc):
                name = env_name(cls, field)
                raise ConfigError(config_line(name, env.get(name), accepted_values(info))) from None
        raise ConfigError(f"configuration error: {exc}") from None


def check_model_spec(spec: str, source: str) -> str:
    """`spec` if it names a provider this process can build; ConfigError naming `source`."""
    from turnkeep.plumbing.credentials import CredentialError
    from turnkeep.providers.factory import ProviderConfigError, provider_from_config

    try:
        provider_from_config(spec)
    except ProviderConfigError as exc:
        raise ConfigError(config_problem(source, spec, _after_spec(str(exc)))) from None
    except CredentialError as exc:  # a key reference that cannot be resolved (key=env:NOPE)
        raise ConfigError(config_problem(source, spec, f"its key: {exc}")) from None
    return spec


def _after_spec(message: str) -> str:
    """The provider error without its repeated `provider spec '…': ` lead."""
    if message.startswith("provider spec ") and "': " in message:
        return message.split("': ", 1)[1]
    return message
