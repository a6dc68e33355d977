"""Fixtures of the integration tests shared by several files."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.test_state_machine import deploy
from tests.support.lambda_host import load_function_module
from tests.support.ws_gateway import AUDIENCE, Gateway, running_gateway, start_websocket
from turnkeep.aws_lambda import container


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    """The stack of template.yaml (STANDARD) under moto behind the stand-in API Gateway, the
    API function told the WebSocket URL (TURNKEEP_LIVE_URL) as the template does."""
    with running_gateway() as running:
        env = {
            "TURNKEEP_WS_ENDPOINT": running.endpoint,
            "TURNKEEP_JWT_ISSUER": running.issuer,
            "TURNKEEP_JWT_AUDIENCE": AUDIENCE,
            "TURNKEEP_JWKS_URL": f"{running.url}/jwks",
            "TURNKEEP_LIVE_URL": running.ws_url,
        }
        with deploy(monkeypatch, "STANDARD", **env) as deployed:
            monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", deployed.state_machine_arn)
            container.reset_runtime()
            running.host = deployed.host
            start_websocket(running, load_function_module("api"), load_function_module("live"))
            yield running
