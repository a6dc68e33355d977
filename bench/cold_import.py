"""Cold-import time of each Lambda handler module next to a bare `import boto3`.

Each figure is the median wall time of fresh interpreter processes that import the module
(interpreter start-up included, measured the same way for the baseline). `--smoke` runs 2
processes per case instead of 9.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LOAD_HANDLER = (
    "import importlib.util, sys; "
    "spec = importlib.util.spec_from_file_location('app', sys.argv[1]); "
    "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)"
)

CASES: list[tuple[str, list[str]]] = [
    ("python (no imports)", ["-c", "pass"]),
    ("import boto3", ["-c", "import boto3"]),
    ("functions/turn_steps/app.py", ["-c", LOAD_HANDLER, "functions/turn_steps/app.py"]),
    ("functions/api/app.py", ["-c", LOAD_HANDLER, "functions/api/app.py"]),
]


def _time(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="2 runs per case")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    runs = 2 if args.smoke else args.runs
    env = {
        **os.environ,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "TURNKEEP_TABLE": "bench-table",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    print(f"cold import, median of {runs} fresh processes (interpreter start included)")
    print(f"{'module':34} {'median s':>9} {'vs boto3':>9}")
    baseline = None
    for name, case_args in CASES:
        if len(case_args) > 2 and not (ROOT / case_args[2]).exists():
            print(f"{name:34} {'absent':>9}")
            continue
        median = statistics.median(_time(case_args, env) for _ in range(runs))
        if name == "import boto3":
            baseline = median
        ratio = f"{median / baseline:.2f}x" if baseline else "-"
        print(f"{name:34} {median:9.3f} {ratio:>9}")


if __name__ == "__main__":
    main()
