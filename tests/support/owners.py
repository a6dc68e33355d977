"""Turn owners for tests: a process that is gone, and one that runs."""

from __future__ import annotations

import subprocess
import sys

from turnkeep.harness.local_owner import Owner, current_owner


def dead_owner() -> Owner:
    """This host's owner record of a process that has exited (a real, reaped pid)."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return current_owner().model_copy(update={"pid": int(done.stdout), "process_start": None})
