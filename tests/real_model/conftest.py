"""Fixtures of the real-model tests: SmolLM2-135M-Instruct on llama.cpp's `llama-server`.

These tests run only when the prepared server is given (`make test-real-model`, which runs
`python -m tools.real_model`): `TURNKEEP_REAL_MODEL_SERVER` (the binary) and
`TURNKEEP_REAL_MODEL_GGUF` (the model). Without them `make test`'s plain `pytest` collects
nothing here; with them a missing file is an error, never a skip.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_model.proxy import RecordingProxy
from tests.support.real_server import RealServer
from tools.real_model.server import LlamaServer

SERVER_ENV = "TURNKEEP_REAL_MODEL_SERVER"
MODEL_ENV = "TURNKEEP_REAL_MODEL_GGUF"

if not os.environ.get(SERVER_ENV):
    collect_ignore_glob = ["test_*.py"]


def _given(name: str) -> Path:
    path = Path(os.environ.get(name, ""))
    if not path.is_file():
        pytest.fail(f"{name}={path} is not a file: run `make test-real-model`", pytrace=False)
    return path


@pytest.fixture(scope="session")
def llama_files() -> tuple[Path, Path]:
    """(server binary, model file) as prepared by tools/real_model/prepare.py."""
    return _given(SERVER_ENV), _given(MODEL_ENV)


def new_llama(
    files: tuple[Path, Path], log_dir: Path, *, ctx_size: int = 4096, extra: tuple[str, ...] = ()
) -> LlamaServer:
    """A LlamaServer (not started) logging into `log_dir`."""
    return LlamaServer(
        *files, log_path=log_dir / f"llama-{ctx_size}.log", ctx_size=ctx_size, extra_args=extra
    )


@pytest.fixture(scope="module")
def llama(
    llama_files: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """One llama-server (4096-token window) for a test module, stopped by its pid after."""
    server = new_llama(llama_files, tmp_path_factory.mktemp("llama"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def proxy(llama: LlamaServer) -> Iterator[RecordingProxy]:
    """The recording relay in front of the module's server."""
    with RecordingProxy(llama.url) as relay:
        yield relay


def spec_for(base_url: str, ctx_size: int, *settings: str) -> str:
    """turnkeep's model spec for a llama-server (or the relay in front of it) at `base_url`."""
    options = "&".join((f"context={ctx_size}", *settings))
    return f"openai:{base_url}/v1#smollm2?{options}"


def serve(data_dir: Path, model: str, **env: str) -> RealServer:
    """A `turnkeep serve` process (not started) on `data_dir` running `model`."""
    return RealServer(
        data_dir,
        command=[sys.executable, "-m", "turnkeep.cli", "serve"],
        extra_env={"TURNKEEP_MODEL": model, "TURNKEEP_LIVE_INTERVAL_MS": "20", **env},
    )
