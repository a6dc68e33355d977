"""Tools that misbehave on purpose (module level, so a worker process can unpickle them)."""

from __future__ import annotations

import os
import time

from pydantic import BaseModel

from turnkeep.tools.base import Tool, ToolContext, ToolResult


class SpinArgs(BaseModel):
    seconds: float = 60.0


def _spin(args: SpinArgs, _ctx: ToolContext) -> ToolResult:
    # Pure-Python CPU work: holds the GIL of whatever process runs it.
    end = time.monotonic() + args.seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return ToolResult(f"spun {n}")


def _hang(args: SpinArgs, _ctx: ToolContext) -> ToolResult:
    time.sleep(args.seconds)
    return ToolResult("woke up")


def _pid(_args: SpinArgs, ctx: ToolContext) -> ToolResult:
    return ToolResult(f"{os.getpid()} {sorted(ctx.extras)}")


def _die(_args: SpinArgs, _ctx: ToolContext) -> ToolResult:
    os._exit(3)


def _boom(_args: SpinArgs, _ctx: ToolContext) -> ToolResult:
    raise RuntimeError("tool bug")


SPIN = Tool("spin", "Burn CPU for `seconds`.", SpinArgs, _spin)
HANG = Tool("hang", "Sleep for `seconds`.", SpinArgs, _hang)
PID = Tool("pid", "The process id that runs the call.", SpinArgs, _pid)
PID_IN_PROCESS = Tool("pid_here", "Same, in-process.", SpinArgs, _pid, isolation="in_process")
DIE = Tool("die", "Exit the process running the call.", SpinArgs, _die)
BOOM = Tool("boom", "Raise.", SpinArgs, _boom)
