"""Registers every backend module under tests/conformance/backends/ with the shared suite."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.conformance.backends as backends_pkg
from tests.conformance.backends import BackendHarness

BACKENDS = sorted(m.name for m in pkgutil.iter_modules(backends_pkg.__path__))


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
