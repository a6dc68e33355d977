"""`bench/turn_bench.py --smoke` runs the harness end to end and prints its figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "turn_bench.py"


def test_turn_bench_smoke_prints_commits_per_model_round_and_per_tool_step() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--smoke"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert "per model round: median" in done.stdout
    assert "per tool step  : median" in done.stdout
    assert "10000 words:" in done.stdout
