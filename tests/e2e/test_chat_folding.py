"""`turnkeep chat` in-process folds a long tool result to one line and `/show` prints it whole
(as the model got it: the preview of a result too long for the model, with its marker)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from turnkeep import cli


def test_the_in_process_chat_folds_a_long_result_and_show_prints_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith("TURNKEEP_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(
        ["chat", "--session", "fold-1", "--agent", "tests.support.pantry_tools:agent"]
    )
    out = io.StringIO()

    code = cli.run_chat(args, io.StringIO('call dump_pantry {"kb": 200}\n/show 1\n/show 9\n'), out)

    text = out.getvalue()
    assert code == 0
    folded = next(line for line in text.splitlines() if "<- dump_pantry [ok]" in line)
    assert folded.startswith("  <- dump_pantry [ok] shelf 00000: rice, oats, tea, beans [folded: ")
    assert folded.endswith(" lines; /show 1 prints it whole]")
    assert len(folded) < 200
    whole = text.split("  <- dump_pantry [ok] #1, ", 1)[1]
    assert "shelf 00500: rice" in whole
    assert "[tool result truncated: showing characters 0-25395 of " in whole
    assert "/show takes a tool result's number, 1 to 1 (got '9')" in text
