"""A bad agent reference (TURNKEEP_AGENT or --agent) or a model spec whose key cannot be
resolved is one line naming it, exit status 2, on every subcommand — before anything starts."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from turnkeep import cli
from turnkeep.runtime.agent_loading import forget_agents


@pytest.fixture(autouse=True)
def local_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TURNKEEP_MODEL", "TURNKEEP_STORAGE_URL", "TURNKEEP_ENVELOPE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("TURNKEEP_AGENT", raising=False)
    monkeypatch.setenv("TURNKEEP_LOCAL_DIR", str(tmp_path / "local"))
    monkeypatch.chdir(tmp_path)
    package = tmp_path / "pkgs" / "badagents"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "twice.py").write_text(
        textwrap.dedent(
            '''
            from turnkeep import Agent

            def lookup(key: str) -> str:
                """Look a key up."""
                return key

            agent = Agent(tools=[lookup, lookup])
            '''
        )
    )
    (package / "notes_name.py").write_text(
        textwrap.dedent(
            '''
            from turnkeep import Agent, tool

            @tool(name="working_notes_update")
            def mine(text: str) -> str:
                """Mine."""
                return text

            agent = Agent(tools=[mine])
            '''
        )
    )
    (package / "broken.py").write_text("raise RuntimeError('the database is not configured')\n")
    (package / "plain.py").write_text("agent = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    forget_agents()
    yield tmp_path
    forget_agents()


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


SUBCOMMANDS = [["chat"], ["serve", "--port", "0"], ["demo"]]


@pytest.mark.parametrize("argv", SUBCOMMANDS, ids=lambda a: a[0])
@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        ("nosuch.module:agent", "no module named 'nosuch'"),
        ("badagents.plain:missing", "module 'badagents.plain' has no attribute 'missing'"),
        ("badagents.plain:agent", "agent is a int, not a turnkeep.Agent"),
        ("badagents.twice:agent", "tool name 'lookup' is used twice"),
        ("badagents.notes_name:agent", "tool name 'working_notes_update' is a working-notes"),
        ("badagents.broken:agent", "RuntimeError: the database is not configured"),
        ("just-a-name", "expected package.module:attribute"),
    ],
)
def test_a_bad_agent_flag_is_one_line_naming_the_flag_and_the_reference(
    capsys: pytest.CaptureFixture[str], argv: list[str], reference: str, problem: str
) -> None:
    line = _one_line(capsys, [*argv, "--agent", reference])

    assert line.startswith(f"turnkeep {argv[0]}: --agent={reference!r} is not accepted: "), line
    assert problem in line


@pytest.mark.parametrize("argv", SUBCOMMANDS, ids=lambda a: a[0])
def test_a_bad_agent_variable_is_one_line_naming_the_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.setenv("TURNKEEP_AGENT", "badagents.twice:agent")

    line = _one_line(capsys, argv)

    assert line.startswith(f"turnkeep {argv[0]}: TURNKEEP_AGENT='badagents.twice:agent' is not")
    assert "used twice" in line


@pytest.mark.parametrize("argv", [["chat"], ["serve", "--port", "0"]], ids=lambda a: a[0])
@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("sk-abc", "literal keys are not accepted"),
        ("env:TURNKEEP_TEST_NOPE", "environment variable TURNKEEP_TEST_NOPE is not set"),
    ],
)
def test_a_model_key_that_cannot_be_resolved_is_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    key: str,
    problem: str,
) -> None:
    monkeypatch.delenv("TURNKEEP_TEST_NOPE", raising=False)
    spec = f"openai:http://127.0.0.1:9/v1#m?key={key}"

    line = _one_line(capsys, [*argv, "--model", spec])

    assert line.startswith(f"turnkeep {argv[0]}: --model={spec!r} is not accepted: "), line
    assert problem in line
