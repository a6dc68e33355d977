"""Shared AWS clients: one per (service, region, endpoint the client gets), one session."""

from __future__ import annotations

import pytest

from turnkeep import aws_clients
from turnkeep.aws_clients import shared_client

ENDPOINT = "http://127.0.0.1:5999"


@pytest.fixture(autouse=True)
def fresh_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """No client or session from earlier tests; a region and no endpoint variables."""
    monkeypatch.setattr(aws_clients, "_CLIENTS", {})
    monkeypatch.setattr(aws_clients, "_SESSION", None)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", raising=False)


def test_one_client_per_service_and_one_session_for_all() -> None:
    dynamodb = shared_client("dynamodb")
    assert shared_client("dynamodb") is dynamodb
    s3 = shared_client("s3")
    assert s3 is not dynamodb
    assert aws_clients._SESSION is not None
    assert len(aws_clients._CLIENTS) == 2


def test_the_configured_endpoint_named_explicitly_is_the_default_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", ENDPOINT)
    default = shared_client("dynamodb")
    assert shared_client("dynamodb", "", ENDPOINT) is default
    assert default.meta.endpoint_url == ENDPOINT


def test_a_changed_endpoint_variable_is_another_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", ENDPOINT)
    first = shared_client("dynamodb")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:6002")
    second = shared_client("dynamodb")
    assert second is not first
    assert second.meta.endpoint_url == "http://127.0.0.1:6002"


def test_another_endpoint_is_another_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", ENDPOINT)
    other = shared_client("dynamodb", "", "http://127.0.0.1:6000")
    assert other is not shared_client("dynamodb")
    assert other.meta.endpoint_url == "http://127.0.0.1:6000"


@pytest.mark.parametrize(
    "variable", ["AWS_ENDPOINT_URL_DYNAMODB", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"]
)
def test_an_endpoint_override_keeps_the_explicit_client_apart(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # boto3's default endpoint is then not AWS_ENDPOINT_URL: the explicit one must stay exact.
    monkeypatch.setenv("AWS_ENDPOINT_URL", ENDPOINT)
    monkeypatch.setenv(variable, "http://127.0.0.1:6001" if "DYNAMODB" in variable else "true")
    explicit = shared_client("dynamodb", "", ENDPOINT)
    assert explicit is not shared_client("dynamodb")
    assert explicit.meta.endpoint_url == ENDPOINT
