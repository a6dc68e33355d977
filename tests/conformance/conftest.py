"""Registers every storage backend (tests/conformance/backends/), every model provider
(tests/conformance/providers/) and every kind of tool source (tests/conformance/tool_sources/)
with the shared suites."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.conformance.backends as backends_pkg
import tests.conformance.providers as providers_pkg
import tests.conformance.tool_sources as tool_sources_pkg
from tests.conformance.backends import BackendHarness
from tests.conformance.providers import ProviderHarness
from tests.conformance.tool_sources import ToolSourceHarness

BACKENDS = sorted(m.name for m in pkgutil.iter_modules(backends_pkg.__path__))
PROVIDERS = sorted(m.name for m in pkgutil.iter_modules(providers_pkg.__path__))
TOOL_SOURCES = sorted(m.name for m in pkgutil.iter_modules(tool_sources_pkg.__path__))


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


def _made(package: str, name: str) -> Iterator[Any]:
    """The harness `make()` of module `name` of `package` builds, closed after the test."""
    harness = importlib.import_module(f"tests.conformance.{package}.{name}").make()
    try:
        yield harness
    finally:
        harness.close()


def _provider(name: str) -> Iterator[ProviderHarness]:
    yield from _made("providers", name)


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


@pytest.fixture(scope="module", params=TOOL_SOURCES)
def tool_source(request: pytest.FixtureRequest) -> Iterator[ToolSourceHarness]:
    """Each tool-source conformance test runs once per registered kind of source; one source
    serves a module's tests (a stdio server is a process start per listing and call)."""
    yield from _made("tool_sources", request.param)


def _remote(name: str) -> bool:
    module = importlib.import_module(f"tests.conformance.tool_sources.{name}")
    return not getattr(module, "LOCAL", False)


@pytest.fixture(params=[name for name in TOOL_SOURCES if _remote(name)])
def remote_tool_source(request: pytest.FixtureRequest) -> Iterator[ToolSourceHarness]:
    """The kinds of source that can be out of reach (not function tools, `LOCAL = True`): a
    test of being down runs once per such kind, and is no parameter at all for the others."""
    yield from _made("tool_sources", request.param)
