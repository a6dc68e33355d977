"""Stopping a child process the tools and tests started: a crash (SIGKILL) or a graceful stop
(SIGTERM, then SIGKILL when it hangs)."""

from __future__ import annotations

import os
import signal
import subprocess


def kill9(process: subprocess.Popen[bytes] | subprocess.Popen[str] | None) -> None:
    """SIGKILL: no shutdown code runs, as in a crash."""
    if process is not None and process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def stop(
    process: subprocess.Popen[bytes] | subprocess.Popen[str] | None, *, grace_s: float
) -> None:
    """SIGTERM, then SIGKILL if it does not exit within `grace_s`."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        kill9(process)
