"""API keys for model endpoints, from the usual places only: the environment, AWS Secrets Manager
or SSM Parameter Store (via Powertools parameters, which caches them briefly). Never from the
session envelope or working notes, and never a literal key inside a configuration string.

A *reference* names where the key lives:

- ``env:NAME`` — environment variable NAME;
- ``secretsmanager:NAME`` — the secret's string value; ``secretsmanager:NAME#field`` — one
  string field of a JSON secret;
- ``ssm:NAME`` — the (decrypted) parameter value, ``ssm:NAME#field`` likewise.

Secret and parameter names cannot contain ``#``, so the field suffix is unambiguous.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parameters.base import BaseProvider
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_ssm import SSMClient

API_KEY_ENV_VARS = ("TURNKEEP_OPENAI_API_KEY", "OPENAI_API_KEY")
"""Environment variables holding the key itself, in order of precedence."""
API_KEY_REF_ENV_VAR = "TURNKEEP_OPENAI_API_KEY_REF"
"""Environment variable holding a reference (see module doc); wins over the plain variables."""

_SCHEMES = ("env", "secretsmanager", "ssm")


class CredentialError(Exception):
    """A key reference is malformed or names something that does not exist or cannot be read.

    Messages name the reference, never a secret value. Not a model error: each user says what
    a missing credential means to it (the providers a fatal model error, `ModelCredentialError`;
    an MCP source a tool error).
    """

    code = "credentials"


def resolve_api_key(
    reference: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    secrets_client: SecretsManagerClient | None = None,
    ssm_client: SSMClient | None = None,
    max_age: int | None = None,
) -> str | None:
    """The API key for an OpenAI-compatible endpoint, or None when none is configured.

    Order: the explicit `reference`; else `TURNKEEP_OPENAI_API_KEY_REF`; else the first
    non-empty of `TURNKEEP_OPENAI_API_KEY`, `OPENAI_API_KEY`. None suits keyless local servers
    (Ollama, vLLM); a configured reference that cannot be resolved raises CredentialError.
    """
    env = os.environ if environ is None else environ
    if reference is None:
        reference = env.get(API_KEY_REF_ENV_VAR) or None
    if reference is not None:
        return resolve_secret(
            reference,
            environ=env,
            secrets_client=secrets_client,
            ssm_client=ssm_client,
            max_age=max_age,
        )
    for name in API_KEY_ENV_VARS:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def resolve_secret(
    reference: str,
    *,
    environ: Mapping[str, str] | None = None,
    secrets_client: SecretsManagerClient | None = None,
    ssm_client: SSMClient | None = None,
    max_age: int | None = None,
) -> str:
    """The secret a reference (``env:`` / ``secretsmanager:`` / ``ssm:``) names, stripped."""
    scheme, sep, target = reference.partition(":")
    if not sep or scheme not in _SCHEMES:
        raise CredentialError(
            f"credential reference {_describe(reference)} must start with one of "
            f"{', '.join(s + ':' for s in _SCHEMES)} (literal keys are not accepted here; "
            f"put the key in {API_KEY_ENV_VARS[0]} instead)"
        )
    name, _, json_field = target.partition("#")
    if not name.strip():
        raise CredentialError(f"credential reference {reference!r} names nothing after {scheme}:")
    if scheme == "env":
        env = os.environ if environ is None else environ
        value = env.get(name, "")
        if not value.strip():
            raise CredentialError(f"environment variable {name} is not set or empty")
        raw: str | bytes | dict[str, object] | None = value
    else:
        raw = _fetch(scheme, name, secrets_client, ssm_client, max_age)
    text = _text(raw, reference)
    if json_field:
        text = _json_field(text, json_field, reference)
    text = text.strip()
    if not text:
        raise CredentialError(f"credential {reference!r} is empty")
    return text


def _fetch(
    scheme: str,
    name: str,
    secrets_client: SecretsManagerClient | None,
    ssm_client: SSMClient | None,
    max_age: int | None,
) -> str | bytes | dict[str, object] | None:
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
    from botocore.exceptions import BotoCoreError

    try:
        if scheme == "secretsmanager":
            if secrets_client is not None:
                provider = _injected_provider(parameters.SecretsProvider, secrets_client)
                return provider.get(name, max_age=max_age)
            return parameters.get_secret(name, max_age=max_age)
        if ssm_client is not None:
            ssm = _injected_provider(parameters.SSMProvider, ssm_client)
            return ssm.get(name, max_age=max_age, decrypt=True)
        return parameters.get_parameter(name, decrypt=True, max_age=max_age)
    except (GetParameterError, BotoCoreError) as exc:
        # Powertools wraps the errors of the read (not found, access denied, no credentials);
        # building its default boto3 client (no region configured) raises the SDK's own error.
        # Neither text carries a value.
        raise CredentialError(f"cannot read {scheme}:{name}: {exc}") from exc


# Powertools caches values per provider object: one provider per injected client (a few at most,
# the oldest dropped), so a key resolved at every model round is read once per max_age, as with
# the default providers.
_injected_providers: dict[tuple[type[Any], int], tuple[object, Any]] = {}
_injected_providers_lock = threading.Lock()
_MAX_INJECTED_PROVIDERS = 8


_Provider = TypeVar("_Provider", bound="BaseProvider")


def _injected_provider(kind: type[_Provider], client: object) -> _Provider:
    key = (kind, id(client))
    with _injected_providers_lock:
        found = _injected_providers.get(key)
        if found is not None and found[0] is client:
            return found[1]  # type: ignore[no-any-return]
        provider = kind(boto3_client=client)  # type: ignore[call-arg]
        _injected_providers[key] = (client, provider)
        while len(_injected_providers) > _MAX_INJECTED_PROVIDERS:
            del _injected_providers[next(iter(_injected_providers))]
        return provider


def _text(raw: str | bytes | dict[str, object] | None, reference: str) -> str:
    if isinstance(raw, bytes):
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CredentialError(f"credential {reference!r} is binary, not UTF-8 text") from exc
    if isinstance(raw, str):
        return raw
    raise CredentialError(f"credential {reference!r} has no text value")


def _json_field(text: str, json_field: str, reference: str) -> str:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise CredentialError(
            f"credential {reference!r}: the value is not JSON, so it has no field {json_field!r}"
        ) from exc
    if not isinstance(document, dict) or json_field not in document:
        raise CredentialError(f"credential {reference!r}: no field {json_field!r} in the JSON")
    value = document[json_field]
    if not isinstance(value, str):
        raise CredentialError(f"credential {reference!r}: field {json_field!r} is not a string")
    return value


def _describe(reference: str) -> str:
    # The reference might be a key pasted by mistake: show only its shape.
    scheme, sep, _ = reference.partition(":")
    if sep and scheme.isalpha() and len(scheme) <= 20:
        return f"with scheme {scheme!r}"
    return f"of {len(reference)} characters"
