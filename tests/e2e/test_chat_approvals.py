"""`turnkeep chat` asks y/n for a call that waits for approval: in-process, and with `--url`
against the real local server (the `server` fixture of test_api_server)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from tests.e2e.test_api_server import server  # noqa: F401  (the real-server fixture)
from tests.e2e.test_cli_remote_chat import _chat
from turnkeep import cli
from turnkeep.cli.approvals import Answer
from turnkeep.cli.chat import LocalChat
from turnkeep.cli.printer import StreamPrinter
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings

pytestmark = pytest.mark.slow


def _local_chat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stdin: str) -> str:
    for key in [k for k in os.environ if k.startswith("TURNKEEP_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    args = cli.build_parser().parse_args(
        ["chat", "--session", "chat-a", "--require-approval", "echo"]
    )
    assert cli.run_chat(args, io.StringIO(stdin), out) == 0
    return out.getvalue()


def test_the_local_chat_asks_and_an_approved_call_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _local_chat(tmp_path, monkeypatch, 'call echo {"text": "hi there"}\ny\n/quit\n')

    asked = '  ?? approval needed: tool call echo {"text": "hi there"}'
    assert asked in text
    assert text.index('  -> tool call echo {"text": "hi there"}') < text.index(asked)
    assert "approve? [y]es / [n]o / [e]dit: " in text
    assert "  <- echo [ok] hi there" in text
    assert "Tool echo returned: hi there" in text


def test_the_local_chat_denies_with_a_reason_and_edits_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdin = (
        'call echo {"text": "a"}\nn\ntoo noisy\n'
        'call echo {"text": "b"}\ne\n{"text": 7}\ne\n{"text": "edited"}\n/quit\n'
    )
    text = _local_chat(tmp_path, monkeypatch, stdin)

    assert "  <- echo [error] Error: the user denied this call of echo: too noisy" in text
    assert "answer again]" in text  # the schema-breaking edit is refused, the question repeats
    assert "  <- echo [ok] [the user edited the arguments" in text
    assert "Tool echo returned: [the user edited the arguments" in text


def test_the_remote_chat_asks_and_the_server_runs_the_approved_call(
    server: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    done = _chat(
        server,
        'call echo {"text": "over http"}\ny\n/quit\n',
        tmp_path,
        "--user",
        "alice",
        "--require-approval",
        "echo",
    )

    assert done.returncode == 0, done.stderr
    out = done.stdout
    asked = '  ?? approval needed: tool call echo {"text": "over http"}'
    assert asked in out
    # The call first, then the question about it: as the in-process chat prints them.
    assert out.index('  -> tool call echo {"text": "over http"}') < out.index(asked)
    assert "  <- echo [ok] over http" in out
    assert ": completed, 2 model rounds, " in out
    assert done.stderr == ""


def test_a_call_that_needed_no_approval_is_printed_once_after_the_decision(
    tmp_path: Path,
) -> None:
    settings = TurnkeepSettings(local_dir=tmp_path / ".local")
    runtime = build_runtime(settings)
    try:
        runtime.envelopes.create("chat-b", "alice", {"toolApproval": "echo"})
        out = io.StringIO()
        printer = StreamPrinter(out)
        chat = LocalChat(
            runtime, "chat-b", "alice", "scripted", printer, ask=lambda _t, _a: Answer("approve")
        )

        chat.turn('call echo {"text": "gated"}\ncall calculator {"expression": "6*7"}')
    finally:
        runtime.close()

    text = out.getvalue()
    assert text.count("  <- calculator [ok] 42") == 1
    assert text.count("  <- echo [ok] gated") == 1
