"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.state_machine import Deployed, deploy
from tests.support.ws_gateway import Gateway, deployed_gateway


@pytest.fixture(params=["STANDARD", "EXPRESS"])
def deployed(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Deployed]:
    """The template's stack under moto for each WorkflowType (tests/support/state_machine.py)."""
    with deploy(monkeypatch, request.param) as stack:
        yield stack


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    """The stack of template.yaml under moto behind the stand-in API Gateway
    (tests/support/ws_gateway.py)."""
    with deployed_gateway(monkeypatch) as running:
        yield running
