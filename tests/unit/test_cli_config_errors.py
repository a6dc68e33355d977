"""Every configuration error of `turnkeep` is one line naming the variable or flag, the bad
value and what is accepted, with exit status 2 — and nothing starts before it is checked."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.owners import dead_owner
from turnkeep import cli
from turnkeep.envelope import open_envelope_store
from turnkeep.harness import StartTurnInput, start_turn
from turnkeep.harness.local_owner import record_owner
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings


@pytest.fixture(autouse=True)
def local_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TURNKEEP_MODEL", "TURNKEEP_STORAGE_URL", "TURNKEEP_ENVELOPE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TURNKEEP_LOCAL_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("assignment", "argv", "accepted"),
    [
        ("TURNKEEP_ALLOWED_MODELS=scripted", ["serve", "--port", "0"], "a JSON list"),
        ("TURNKEEP_MAX_STEPS=abc", ["demo"], "an integer >= 1 and <= 1000"),
        ("TURNKEEP_WALL_CLOCK_SECONDS=-1", ["chat"], "a number > 0"),
        ("TURNKEEP_LOCAL_WORKERS=0", ["serve", "--port", "0"], "an integer >= 1"),
        ("TURNKEEP_MODEL=bogus", ["serve", "--port", "0"], "expected one of: scripted"),
        ("TURNKEEP_MODEL=bogus", ["chat"], "expected one of: scripted"),
        ("TURNKEEP_STORAGE_URL=foo://x", ["sessions", "list"], "use one of: memory://"),
    ],
)
def test_a_bad_variable_is_one_line_naming_it_its_value_and_what_is_accepted(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    assignment: str,
    argv: list[str],
    accepted: str,
) -> None:
    variable, value = assignment.split("=", 1)
    monkeypatch.setenv(variable, value)

    line = _one_line(capsys, argv)

    assert line.startswith(f"turnkeep {argv[0]}: {variable}={value!r} is not accepted: ")
    assert accepted in line


@pytest.mark.parametrize(
    ("argv", "flag", "accepted"),
    [
        (["serve", "--port", "70000"], "--port=70000", "0-65535"),
        (["serve", "--port", "0", "--model", "scripted?delay=5"], "--model=", "delay_ms"),
        (["chat", "--model", "openai:nohash"], "--model=", "<base url>#<model>"),
        (["serve", "--port", "0", "--storage", "sqlite://rel.db"], "--storage=", "absolute"),
        (["serve", "--port", "0", "--envelope", "nope://"], "--envelope=", "envelope URL"),
    ],
)
def test_a_bad_flag_is_one_line_naming_it_its_value_and_what_is_accepted(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str, accepted: str
) -> None:
    line = _one_line(capsys, argv)

    assert flag in line
    assert accepted in line


def test_a_bad_model_stops_serve_before_it_resumes_any_unfinished_turn(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, local_dir: Path
) -> None:
    runtime = build_runtime(TurnkeepSettings(local_dir=local_dir))
    try:
        runtime.envelopes.create("left", "u1")
        with runtime.deps.open_storage("left") as storage:
            record_owner(storage, "op-left", dead_owner())
        start_turn(
            runtime.deps,
            StartTurnInput(session_id="left", op_id="op-left", user_id="u1", text="hi"),
        )
    finally:
        runtime.close()
    monkeypatch.setenv("TURNKEEP_MODEL", "bogus")

    _one_line(capsys, ["serve", "--port", "0"])

    envelopes = open_envelope_store(f"sqlite:///{local_dir / 'turnkeep.db'}")
    try:
        envelope = envelopes.get("left")
        assert envelope is not None
        assert envelope.meta["turnStatus"] == "running"  # untouched: not resumed, not failed
    finally:
        envelopes.close()


def test_serve_on_a_busy_port_is_one_clear_line_and_a_non_zero_exit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]

        code = cli.main(["serve", "--port", str(port)])

    err = capsys.readouterr().err
    assert code == 1
    assert err == (
        f"turnkeep serve: port {port} on 127.0.0.1 is already in use (another `turnkeep "
        "serve`?); stop it or pick another with --port\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["serve"],
        ["chat"],
        ["demo"],
        ["sessions"],
        ["sessions", "list"],
        ["sessions", "show"],
        ["sessions", "notes"],
        ["sessions", "delete"],
    ],
)
def test_every_command_level_has_help(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([*argv, "--help"])

    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: turnkeep {' '.join(argv)}".rstrip())


def test_top_level_help_says_how_to_serve(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])

    assert "turnkeep serve" in capsys.readouterr().out
