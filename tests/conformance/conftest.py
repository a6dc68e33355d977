"""Registers every storage backend (tests/conformance/backends/) and every model provider
(tests/conformance/providers/) with the shared suites."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.conformance.backends as backends_pkg
import tests.conformance.providers as providers_pkg
from tests.conformance.backends import BackendHarness
from tests.conformance.providers import ProviderHarness

BACKENDS = sorted(m.name for m in pkgutil.iter_modules(backends_pkg.__path__))
PROVIDERS = sorted(m.name for m in pkgutil.iter_modules(providers_pkg.__path__))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendHarness]:
    """Each conformance test runs once per registered backend."""
    module = importlib.import_module(f"tests.conformance.backends.{request.param}")
    harness: BackendHarness = module.make(tmp_path)
    try:
        yield harness
    finally:
        harness.close_all()
        harness.cleanup()


def _wire_level(name: str) -> bool:
    module = importlib.import_module(f"tests.conformance.providers.{name}")
    return not getattr(module, "WIRELESS", False)


WIRE_PROVIDERS = [name for name in PROVIDERS if _wire_level(name)]


def _provider(name: str) -> Iterator[ProviderHarness]:
    module = importlib.import_module(f"tests.conformance.providers.{name}")
    harness: ProviderHarness = module.make()
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> Iterator[ProviderHarness]:
    """Each provider conformance test runs once per registered provider."""
    yield from _provider(request.param)


@pytest.fixture(params=WIRE_PROVIDERS)
def wire_provider(request: pytest.FixtureRequest) -> Iterator[ProviderHarness]:
    """Each wire-level test (errors, reported usage, abandoned streams) runs once per provider
    that talks to a server; one without (the scripted model, `WIRELESS = True`) is not a
    parameter at all, so nothing is skipped."""
    yield from _provider(request.param)
