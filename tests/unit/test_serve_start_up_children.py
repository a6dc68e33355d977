"""`turnkeep serve` start-up leaves a sub-agent's waiting child turn to its parent: the parent
is launched again (it drives the child on with the child's own agent), the child session never
on its own (docs/agent.md "Sub-agents", docs/approvals.md "Inside a sub-agent")."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from turnkeep import Agent, Tool
from turnkeep.api.__main__ import resume_unfinished
from turnkeep.api.launch import LocalLauncher
from turnkeep.harness import run_turn
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings
from turnkeep.tools.base import ToolContext, ToolResult


class SendArgs(BaseModel):
    to: str


def _send(args: SendArgs, ctx: ToolContext) -> ToolResult:
    return ToolResult(f"sent to {args.to}")


MAILER = Agent(
    name="mailer",
    tools=[Tool("send_mail", "Send a mail.", SendArgs, _send, requires_approval=True)],
)


def test_start_up_relaunches_the_waiting_parent_and_not_its_child_session(
    tmp_path: Path,
) -> None:
    runtime = build_runtime(TurnkeepSettings(local_dir=tmp_path), provider=ScriptedProvider())
    try:
        runtime.deps.agent = Agent(name="triage", agents=[MAILER])
        runtime.envelopes.create("s-parent", "u1")
        task = json.dumps({"input": 'call send_mail {"to": "a@example.com"}'})
        paused = run_turn(runtime.deps, "s-parent", "u1", f"call mailer {task}")
        assert paused.status == "awaiting_approval"
        launched: list[tuple[str, str]] = []
        launcher = LocalLauncher(runtime.deps)
        launcher.launch = lambda s, o: launched.append((s, o))  # type: ignore[method-assign]
        try:
            resumed = resume_unfinished(runtime, launcher)
        finally:
            launcher.shutdown()
    finally:
        runtime.close()

    assert resumed == ["s-parent"]
    assert launched == [("s-parent", paused.op_id)]
