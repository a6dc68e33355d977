"""`python -m tools.sam_local` (make sam-local-test) stops with exit 2 and a clear message on a
machine without Docker or SAM CLI, before starting anything."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tools.sam_local import __main__ as cli
from tools.sam_local import stack


def _which(missing: str) -> Any:
    return lambda name: None if name == missing else f"/usr/bin/{name}"


@pytest.mark.parametrize(("missing", "named"), [("sam", "SAM CLI"), ("docker", "Docker")])
def test_a_missing_tool_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], missing: str, named: str
) -> None:
    monkeypatch.setattr(stack.shutil, "which", _which(missing))

    assert cli.main(["test"]) == 2

    err = capsys.readouterr().err
    assert "cannot run" in err
    assert named in err


def test_a_docker_daemon_that_does_not_answer_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(stack.shutil, "which", _which("none"))

    def no_daemon(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 1, "", "Cannot connect to the Docker daemon")

    monkeypatch.setattr(stack.subprocess, "run", no_daemon)

    assert cli.main(["up"]) == 2
    assert "Docker daemon does not answer" in capsys.readouterr().err


def test_a_runtime_python_that_is_only_a_shim_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(stack.shutil, "which", _which("none"))

    def shim(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if args[0] == "docker":
            return subprocess.CompletedProcess(args, 0, "27.0.0", "")
        return subprocess.CompletedProcess(args, 127, "", "pyenv: python3.12: command not found")

    monkeypatch.setattr(stack.subprocess, "run", shim)

    assert cli.main(["test"]) == 2
    err = capsys.readouterr().err
    assert "python3.12" in err
    assert "pyenv: python3.12: command not found" in err


def test_extra_sam_flags_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAM_LOCAL_FLAGS", raising=False)
    assert stack.sam_flags() == []
    monkeypatch.setenv("SAM_LOCAL_FLAGS", "--skip-pull-image --debug")
    assert stack.sam_flags() == ["--skip-pull-image", "--debug"]


def test_sigterm_and_an_inherited_ignored_sigint_still_end_a_run_through_its_cleanup() -> None:
    import os
    import signal

    originals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    # A shell's background job starts with SIGINT ignored: Ctrl-C would never reach `finally`.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        cli._stop_on_signals()
        for signum in (signal.SIGTERM, signal.SIGINT):
            # The handler runs right after os.kill returns, still inside pytest.raises.
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signum)
    finally:
        for signum, handler in originals.items():
            signal.signal(signum, handler)
