"""`turnkeep demo` as a user runs it: a subprocess in a fresh directory, then its database."""

from __future__ import annotations

import io
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from turnkeep import cli
from turnkeep.envelope import open_envelope_store
from turnkeep.harness.state import load_head
from turnkeep.harness.transcript import branch_messages
from turnkeep.storage import open_repository, open_storage


def _command() -> list[str]:
    script = Path(sys.executable).with_name("turnkeep")
    return [str(script)] if script.exists() else [sys.executable, "-m", "turnkeep.cli"]


def test_demo_streams_turns_folds_notes_and_leaves_no_scope_in_its_sqlite_file(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}

    done = subprocess.run(
        [*_command(), "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.rstrip().endswith("demo OK")
    assert "assistant> You said: hello turnkeep" in out
    assert "-> tool call working_notes_update" in out
    assert "<- calculator [ok] 42" in out
    assert "<- calculator [ok] 1024" in out
    assert out.count("retired, nothing left]") == 5
    assert "NOT retired" not in out
    assert "the deploy region is eu-west-1\nthe answer is 42" in out

    db = tmp_path / ".local" / "turnkeep.db"
    url = f"sqlite:///{db}"
    (session_id,) = open_repository(url).list_sessions()
    with open_storage(url, session_id) as storage:
        messages = branch_messages(storage, load_head(storage))
    assert [m.text for m in messages if m.role == "user"][-1] == "what do you remember?"
    assert messages[-1].text == (
        "Here is what I remember:\nthe deploy region is eu-west-1\nthe answer is 42"
    )
    envelopes = open_envelope_store(url)
    try:
        envelope = envelopes.get(session_id)
    finally:
        envelopes.close()
    assert envelope is not None
    assert envelope.meta["turnStatus"] == "completed"
    assert envelope.working_notes == "the deploy region is eu-west-1\nthe answer is 42"
    with sqlite3.connect(db) as conn:
        scoped = conn.execute(
            "SELECT (SELECT count(*) FROM scalar_values WHERE scope_id != '')"
            " + (SELECT count(*) FROM list_values WHERE scope_id != '')"
        ).fetchone()[0]
        operations = conn.execute(
            "SELECT count(*) FROM scalar_values WHERE namespace = 'turn.op'"
        ).fetchone()[0]
    assert scoped == 0
    assert operations == 0


def _chat(
    script: str, session: str, monkeypatch: pytest.MonkeyPatch, cwd: Path, *options: str
) -> tuple[int, str]:
    """The in-process chat on `script` in `cwd` (with `options`, e.g. `--agent`), with no
    TURNKEEP_ setting of this process."""
    for key in [k for k in os.environ if k.startswith("TURNKEEP_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(cwd)
    out = io.StringIO()
    args = cli.build_parser().parse_args(["chat", "--session", session, *options])
    code = cli.run_chat(args, io.StringIO(script), out)
    return code, out.getvalue()


def test_chat_streams_one_turn_per_line_and_keeps_notes_between_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "hello\nremember tea is good\n/notes\nwhat do you remember?\n/quit\n"

    code, text = _chat(script, "chat-1", monkeypatch, tmp_path)

    assert code == 0
    assert "assistant> You said: hello" in text
    assert "-> tool call working_notes_update" in text
    assert "you> tea is good\n" in text  # /notes prints the stored notes
    assert "assistant> Here is what I remember:\ntea is good" in text
    assert (tmp_path / ".local" / "turnkeep.db").exists()


def test_demo_output_explains_its_notation_and_never_hides_lines_of_a_tool_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith("TURNKEEP_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()

    code = cli.run_demo(cli.build_parser().parse_args(["demo"]), out)

    text = out.getvalue()
    assert code == 0
    legend = text.split("\nuser> ", 1)[0]
    for mark in ("scripted", "user>", "assistant>", "->", "<-", "[turn", "[scope"):
        assert mark in legend
    assert "<- working_notes_get [ok] the deploy region is eu-west-1 (+1 more line)\n" in text
    assert "completed, 1 model round, " in text
    assert "model rounds" in text  # plural where it is plural


def test_the_in_process_chat_ends_every_turn_with_its_status_rounds_and_tokens_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = 'hello\ncall calculator {"expression": "6*7"}\n/quit\n'

    code, text = _chat(script, "chat-2", monkeypatch, tmp_path)

    assert code == 0
    ends = re.findall(
        r"\[turn op-\w+: completed, (\d) model rounds?, \d+ in / \d+ out tokens\]", text
    )
    assert ends == ["1", "2"], text
