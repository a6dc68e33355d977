"""`python -m tools.real_model [pytest args]`: what `make test-real-model` runs.

Prepares `llama-server` and SmolLM2 in the machine's cache (tools/real_model/prepare.py; a
failure is one line and exit 1), then runs `tests/real_model/` with the binary and model given
through `TURNKEEP_REAL_MODEL_SERVER` / `TURNKEEP_REAL_MODEL_GGUF` (the tests' fixtures start and
stop the server). No test collected is a failure too (exit 1), never a silent skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tools.real_model.prepare import prepare_and_say

NO_TESTS_COLLECTED = 5


def main(argv: list[str]) -> int:
    prepared = prepare_and_say()
    if prepared is None:
        return 1
    env = dict(os.environ)
    env["TURNKEEP_REAL_MODEL_SERVER"] = str(prepared.server)
    env["TURNKEEP_REAL_MODEL_GGUF"] = str(prepared.model)
    started = time.monotonic()
    # CPU inference on a loaded 2-core machine: a turn of the overflow test takes minutes.
    command = [sys.executable, "-m", "pytest", "-q", "--timeout", "900", "tests/real_model"]
    status = subprocess.run([*command, *argv], env=env, check=False).returncode
    print(f"== real-model tests: exit {status} in {time.monotonic() - started:.1f} s")
    if status == NO_TESTS_COLLECTED:
        print("real-model tests: pytest collected no tests: failing the run", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
