"""API-key resolution: environment, Secrets Manager and SSM (moto) via Powertools parameters."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from turnkeep.plumbing.credentials import CredentialError, resolve_api_key, resolve_secret


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield


def unique(prefix: str) -> str:
    # Powertools caches values by name for a few seconds: never reuse a name across tests.
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_no_reference_and_no_variables_means_no_key() -> None:
    assert resolve_api_key(environ={}) is None


def test_turnkeep_variable_wins_over_openai_variable() -> None:
    env = {"TURNKEEP_OPENAI_API_KEY": "sk-turnkeep", "OPENAI_API_KEY": "sk-openai"}

    assert resolve_api_key(environ=env) == "sk-turnkeep"
    assert resolve_api_key(environ={"OPENAI_API_KEY": " sk-openai\n"}) == "sk-openai"


def test_env_reference_reads_the_named_variable() -> None:
    assert resolve_api_key("env:MY_KEY", environ={"MY_KEY": "sk-mine"}) == "sk-mine"


def test_missing_env_reference_is_a_clear_error() -> None:
    with pytest.raises(CredentialError, match="MY_KEY is not set"):
        resolve_api_key("env:MY_KEY", environ={})


@pytest.mark.usefixtures("aws")
def test_secretsmanager_reference_reads_the_secret_string() -> None:
    name = unique("turnkeep/openai")
    boto3.client("secretsmanager").create_secret(Name=name, SecretString="sk-from-secrets\n")

    assert resolve_api_key(f"secretsmanager:{name}", environ={}) == "sk-from-secrets"


@pytest.mark.usefixtures("aws")
def test_secretsmanager_reference_with_field_reads_one_json_field() -> None:
    name = unique("turnkeep/keys")
    document = {"openai": "sk-json-field", "other": "x"}
    boto3.client("secretsmanager").create_secret(Name=name, SecretString=json.dumps(document))

    assert resolve_secret(f"secretsmanager:{name}#openai") == "sk-json-field"
    with pytest.raises(CredentialError, match="no field 'missing'"):
        resolve_secret(f"secretsmanager:{name}#missing")


@pytest.mark.usefixtures("aws")
def test_ssm_reference_reads_the_decrypted_parameter() -> None:
    name = "/" + unique("turnkeep/openai-key")
    boto3.client("ssm").put_parameter(Name=name, Value="sk-from-ssm", Type="SecureString")

    assert resolve_api_key(f"ssm:{name}", environ={}) == "sk-from-ssm"


@pytest.mark.usefixtures("aws")
def test_reference_in_the_ref_variable_wins_over_plain_variables() -> None:
    name = "/" + unique("turnkeep/ref")
    boto3.client("ssm").put_parameter(Name=name, Value="sk-ref", Type="SecureString")
    env = {"TURNKEEP_OPENAI_API_KEY_REF": f"ssm:{name}", "OPENAI_API_KEY": "sk-plain"}

    assert resolve_api_key(environ=env) == "sk-ref"


@pytest.mark.usefixtures("aws")
def test_injected_clients_are_used() -> None:
    secrets: Any = boto3.client("secretsmanager")
    ssm: Any = boto3.client("ssm")
    secret_name, param_name = unique("s"), "/" + unique("p")
    secrets.create_secret(Name=secret_name, SecretString="sk-s")
    ssm.put_parameter(Name=param_name, Value="sk-p", Type="SecureString")

    assert resolve_secret(f"secretsmanager:{secret_name}", secrets_client=secrets) == "sk-s"
    assert resolve_secret(f"ssm:{param_name}", ssm_client=ssm) == "sk-p"


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize("scheme", ["secretsmanager", "ssm"])
def test_missing_secret_or_parameter_is_a_clear_error_naming_it(scheme: str) -> None:
    name = "/" + unique("absent")

    with pytest.raises(CredentialError, match=f"cannot read {scheme}:{name}"):
        resolve_secret(f"{scheme}:{name}")


@pytest.mark.parametrize("reference", ["sk-live-abcdef123456", "vault:thing", "ssm:", ""])
def test_malformed_reference_is_rejected_without_echoing_a_pasted_key(reference: str) -> None:
    with pytest.raises(CredentialError) as caught:
        resolve_secret(reference)

    if reference.startswith("sk-"):
        assert reference not in str(caught.value)


@pytest.mark.parametrize("scheme", ["secretsmanager", "ssm"])
def test_reference_without_an_aws_region_is_a_credential_error_not_a_raw_sdk_error(
    monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    from aws_lambda_powertools.utilities.parameters.constants import DEFAULT_PROVIDERS

    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/turnkeep-test-config")
    # Powertools builds its default provider (and boto3 client) on first use: start afresh.
    monkeypatch.delitem(DEFAULT_PROVIDERS, "secrets", raising=False)
    monkeypatch.delitem(DEFAULT_PROVIDERS, "ssm", raising=False)

    with pytest.raises(CredentialError, match=f"cannot read {scheme}:/turnkeep/key") as caught:
        resolve_secret(f"{scheme}:/turnkeep/key")

    assert caught.value.code == "credentials"


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize("scheme", ["secretsmanager", "ssm"])
def test_repeated_reads_through_an_injected_client_are_cached_like_the_default_ones(
    scheme: str,
) -> None:
    # A provider is built per model round; its key must not cost an AWS call every round.
    secrets: Any = boto3.client("secretsmanager")
    ssm: Any = boto3.client("ssm")
    name = "/" + unique("cached")
    if scheme == "secretsmanager":
        secrets.create_secret(Name=name, SecretString="sk-cached")
    else:
        ssm.put_parameter(Name=name, Value="sk-cached", Type="SecureString")
    reads: list[str] = []
    for client in (secrets, ssm):
        client.meta.events.register("before-call.*.*", lambda model, **_: reads.append(model.name))

    for _ in range(3):
        assert resolve_secret(f"{scheme}:{name}", secrets_client=secrets, ssm_client=ssm) == (
            "sk-cached"
        )

    assert len(reads) == 1


def test_a_credential_error_is_the_plumbings_own_never_a_model_error() -> None:
    # An MCP source turns it into a tool error; only the providers make it a model error.
    from turnkeep.providers.base import ModelError

    with pytest.raises(CredentialError) as caught:
        resolve_secret("env:NOT_SET_ANYWHERE", environ={})

    assert not isinstance(caught.value, ModelError)
    assert caught.value.code == "credentials"
