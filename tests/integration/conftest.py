"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.state_machine import Deployed, deploy


@pytest.fixture(params=["STANDARD", "EXPRESS"])
def deployed(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Deployed]:
    """The template's stack under moto for each WorkflowType (tests/support/state_machine.py)."""
    with deploy(monkeypatch, request.param) as stack:
        yield stack
