"""A user's own agent through the `turnkeep` command, as a subprocess in a fresh directory (the
pantry fixture agent and its grocer MCP server): `demo --agent` exercises that agent and never
reports success after an error; `chat --agent` goes on without a server that is down and says
so, then uses it once it is back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.mcp_servers import HttpMcpServer
from tests.support.pantry import GROCER_URL_ENV
from tests.support.pantry.grocer import build_server
from tests.support.real_server import repo_pythonpath

PANTRY = "tests.support.pantry:agent"


def _turnkeep(
    args: list[str], cwd: Path, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
    clean.update({"PYTHONPATH": repo_pythonpath(), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "turnkeep.cli", *args],
        cwd=cwd,
        env=clean,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_demo_with_an_agent_lists_its_tools_and_calls_none_it_does_not_have(
    tmp_path: Path,
) -> None:
    with HttpMcpServer("grocer", build_server()) as grocer:
        done = _turnkeep(["demo", "--agent", PANTRY], tmp_path, env={GROCER_URL_ENV: grocer.url})

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "agent pantry: tools " in out
    assert "put_away (function)" in out
    assert "grocer_price (mcp:grocer)" in out
    assert "unknown tool" not in out
    assert "] Error:" not in out
    assert "calculator" not in out
    assert out.rstrip().endswith("demo OK")


def test_demo_with_an_agent_whose_server_is_down_fails_rather_than_reporting_ok(
    tmp_path: Path,
) -> None:
    done = _turnkeep(["demo", "--agent", PANTRY], tmp_path)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "agent pantry: without grocer: tool source 'grocer': cannot list its tools" in (
        done.stdout
    )
    assert done.stdout.rstrip().endswith("demo FAILED (1 problems)")


def test_chat_with_an_agent_goes_on_without_a_server_that_is_down_then_uses_it_once_back(
    tmp_path: Path,
) -> None:
    script = 'call put_away {"item": "rice", "qty": 2}\ncall grocer_price {"item": "rice"}\n/quit\n'
    down = _turnkeep(["chat", "--agent", PANTRY, "--session", "pantry"], tmp_path, script)

    assert down.returncode == 0, down.stderr
    # Once per turn (the cause is the refused connection, or on a loaded machine the timeout).
    assert down.stdout.count("[without its tools: tool source 'grocer': ") == 2
    assert "<- put_away [ok] put away 2 x rice" in down.stdout
    assert "<- grocer_price [error] Error: tool grocer_price is unavailable" in down.stdout
    assert down.stdout.count("completed, 2 model rounds") == 2
    assert "tool source grocer unavailable" not in down.stderr  # the notice says it, once

    with HttpMcpServer("grocer", build_server()) as grocer:
        back = _turnkeep(
            ["chat", "--agent", PANTRY, "--session", "pantry"],
            tmp_path,
            'call grocer_price {"item": "rice"}\n/quit\n',
            env={GROCER_URL_ENV: grocer.url},
        )

    assert back.returncode == 0, back.stderr
    assert "[without" not in back.stdout
    assert "<- grocer_price [ok] rice: 2.50" in back.stdout


def test_chat_with_a_typed_agent_prints_the_validated_result_as_json(tmp_path: Path) -> None:
    # Each line is a turn: the first submits a valid result, the second an invalid one only.
    script = (
        'call final_result {"label": "bug", "confidence": 0.75}\n'
        'call final_result {"label": "maybe"}\n/quit\n'
    )

    done = _turnkeep(
        ["chat", "--agent", "tests.support.typed_agent:agent", "--session", "t"], tmp_path, script
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert 'result> {\n  "label": "bug",\n  "confidence": 0.75\n}' in done.stdout
    assert "completed, 1 model round" in done.stdout
    assert "final_result failed: the result is invalid (2 error(s)):" in done.stdout
    assert done.stdout.count("result> ") == 1
    assert "failed, 3 model rounds" in done.stdout
    assert "error: output_invalid: " in done.stdout
