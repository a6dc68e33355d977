"""Fixtures the unit tests share: the HTTP API on in-process stores (tests/support/api_client)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.api_client import ApiHarness, make_api_harness


@pytest.fixture
def api() -> Iterator[ApiHarness]:
    """The API with turns driven to their end in-process (a module may override it)."""
    yield from make_api_harness()


@pytest.fixture
def paused_api() -> Iterator[ApiHarness]:
    """Turns are started and launched but nothing drives them."""
    yield from make_api_harness(run_turns=False)
