"""`bench/turn_bench.py --smoke` runs the harness end to end and prints its figures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "turn_bench.py"


@pytest.fixture(scope="module")
def smoke() -> str:
    """The output of one smoke run (shared: it takes a while)."""
    done = subprocess.run(
        [sys.executable, str(BENCH), "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_turn_bench_smoke_prints_commits_per_model_round_and_per_tool_step(smoke: str) -> None:
    assert "per model round: median" in smoke
    assert "per tool step  : median" in smoke
    assert "10000 words:" in smoke


def test_turn_bench_smoke_prints_bytes_and_tokens_per_cold_round_and_a_long_session(
    smoke: str,
) -> None:
    assert "cold model round on AWS (moto)" in smoke
    for prior in ("100", "200"):
        whole = rf"^\s+{prior}\s+whole \(no budget\)\s+[\d,]+\s+\d+\s+[\d,]+$"
        compacted = rf"^\s+{prior}\s+compacted \(context=8000\)\s+[\d,]+\s+\d+\s+[\d,]+$"
        assert re.search(whole, smoke, re.M)
        assert re.search(compacted, smoke, re.M)
    ratio = re.search(r"compacted bytes read at 200 / at 100 prior messages: ([\d.]+)", smoke)
    assert ratio is not None
    assert float(ratio.group(1)) <= 1.2
    assert "60 turns on sqlite with scripted?context=4000: all completed, notes intact" in smoke
    assert "12 turns on aws with scripted?context=4000: all completed, notes intact" in smoke
