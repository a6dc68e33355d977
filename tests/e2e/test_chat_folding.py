"""`turnkeep chat` in-process folds a long tool result to one line and `/show` prints it whole
(as the model got it: the preview of a result too long for the model, with its marker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_cli_demo import _chat


def test_the_in_process_chat_folds_a_long_result_and_show_prints_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = 'call dump_pantry {"kb": 200}\n/show 1\n/show 9\n'

    code, text = _chat(
        script, "fold-1", monkeypatch, tmp_path, "--agent", "tests.support.pantry_tools:agent"
    )

    assert code == 0
    folded = next(line for line in text.splitlines() if "<- dump_pantry [ok]" in line)
    assert folded.startswith("  <- dump_pantry [ok] shelf 00000: rice, oats, tea, beans [folded: ")
    assert folded.endswith(" lines; /show 1 prints it whole]")
    assert len(folded) < 200
    whole = text.split("  <- dump_pantry [ok] #1, ", 1)[1]
    assert "shelf 00500: rice" in whole
    assert "[tool result truncated: showing characters 0-25395 of " in whole
    assert "/show takes a tool result's number, 1 to 1 (got '9')" in text
