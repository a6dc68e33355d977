"""Real `turnkeep serve` processes for the console's browser tests (tests/e2e/test_console_*):
one server per test module where the tests' state allows it (each test signs in as its own
user and opens its own sessions), so a module pays for one server start, not one per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.real_server import RealServer, repo_pythonpath


@contextmanager
def serving(data_dir: Path, extra_env: dict[str, str]) -> Iterator[RealServer]:
    """A running server over `data_dir`; stopped after, and it must not have printed a
    traceback."""
    real = RealServer(data_dir, extra_env=extra_env)
    data_dir.mkdir()
    real.start()
    try:
        yield real
    finally:
        real.stop()
    assert not real.tracebacks(), real.tracebacks()


def agent_env(agent: str, model: str = "scripted?delay_ms=20") -> dict[str, str]:
    """The settings of a server running `agent` ("module:attribute", importable from the
    repository) on the scripted `model`."""
    return {"TURNKEEP_MODEL": model, "TURNKEEP_AGENT": agent, "PYTHONPATH": repo_pythonpath()}


def module_server(env: dict[str, str]) -> Callable[..., Iterator[RealServer]]:
    """A module-scoped `server` fixture: one server with `env` over a fresh data directory for
    the module's tests (assign it to `server` in the test module)."""

    @pytest.fixture(scope="module")
    def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
        with serving(tmp_path_factory.mktemp("console") / "data", env) as real:
            yield real

    return server
