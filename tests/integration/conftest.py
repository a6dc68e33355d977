"""Fixtures of the integration tests shared by several files."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.ws_gateway import Gateway, deployed_gateway


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    """The stack of template.yaml under moto behind the stand-in API Gateway."""
    with deployed_gateway(monkeypatch) as running:
        yield running
