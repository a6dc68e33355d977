"""The process's one client cache: AWS clients one per (service, region, endpoint the client
gets[, config]) from one session; the model endpoints' and MCP servers' HTTP clients in it too."""

from __future__ import annotations

import asyncio
import gc

import pytest
from botocore.config import Config

from turnkeep.mcp import client as mcp_client
from turnkeep.plumbing import clients as aws_clients
from turnkeep.plumbing.clients import cached_client, shared_client
from turnkeep.providers import bedrock, openai_compat

ENDPOINT = "http://127.0.0.1:5999"


@pytest.fixture(autouse=True)
def fresh_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """No client or session from earlier tests; a region and no endpoint variables."""
    monkeypatch.setattr(aws_clients, "_CLIENTS", {})
    monkeypatch.setattr(aws_clients, "_SESSION", None)
    monkeypatch.setattr(aws_clients, "_SCOPED", aws_clients.weakref.WeakKeyDictionary())
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


def test_a_client_with_its_own_config_is_kept_apart_from_the_plain_one_and_shared() -> None:
    config = Config(retries={"total_max_attempts": 1, "mode": "standard"})
    plain = shared_client("bedrock-runtime", "us-east-1")
    one_attempt = shared_client("bedrock-runtime", "us-east-1", config=("one", config))

    assert one_attempt is not plain
    assert shared_client("bedrock-runtime", "us-east-1", config=("one", config)) is one_attempt


def test_the_bedrock_default_client_comes_from_the_one_cache_and_session() -> None:
    client = bedrock.default_client("eu-west-1")

    assert bedrock.default_client("eu-west-1") is client
    assert client in aws_clients._CLIENTS.values()
    assert client.meta.region_name == "eu-west-1"
    assert client.meta.config.retries["total_max_attempts"] == 1


def test_the_model_endpoints_http_client_is_shared_and_a_closed_one_replaced() -> None:
    first = openai_compat.default_client()
    assert openai_compat.default_client() is first

    first.close()
    second = openai_compat.default_client()

    assert second is not first
    assert not second.is_closed
    second.close()


def test_a_rejected_client_is_rebuilt_under_the_same_key() -> None:
    built: list[int] = []

    def build() -> int:
        built.append(len(built))
        return len(built)

    assert cached_client(("k",), build) == 1
    assert cached_client(("k",), build, usable=lambda n: n == 1) == 1
    assert cached_client(("k",), build, usable=lambda n: n == 2) == 2
    assert built == [0, 1]


def test_a_scoped_client_lives_in_its_scopes_space_and_goes_with_it() -> None:
    class Scope:
        pass

    scope, other = Scope(), Scope()
    mine = cached_client(("c",), object, scope=scope)

    assert cached_client(("c",), object, scope=scope) is mine
    assert cached_client(("c",), object, scope=other) is not mine
    assert ("c",) not in aws_clients._CLIENTS
    del scope
    gc.collect()
    assert len(aws_clients._SCOPED) == 1


def test_an_mcp_servers_http_client_is_one_per_loop_and_replaced_when_its_headers_change() -> None:
    endpoint = mcp_client.Endpoint("http://127.0.0.1:9/mcp", {}, None, (), None, None)

    async def clients() -> tuple[object, object, object]:
        first = mcp_client._http_client(endpoint, {"authorization": "Bearer a"})
        again = mcp_client._http_client(endpoint, {"authorization": "Bearer a"})
        rotated = mcp_client._http_client(endpoint, {"authorization": "Bearer b"})
        return first, again, rotated

    first, again, rotated = asyncio.run(clients())
    later, _, _ = asyncio.run(clients())

    assert again is first
    assert rotated is not first
    assert later is not first  # another loop: an async client never crosses loops
