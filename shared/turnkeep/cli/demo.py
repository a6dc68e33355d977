"""`turnkeep demo`: a scripted multi-turn conversation on local SQLite, checked as it goes.

Each turn is run by this process as its recorded owner (`turnkeep.harness.local_owner`); an
interrupt ends the running turn as aborted, so no session is left running. With `--agent` the
demo runs that agent: it lists the agent's tools (as `GET /agent` does) and runs the part of the
script every agent has the tools for (the working notes); the demo agent's tool calls are not
sent to an agent that lacks those tools. A turn that does not complete, a tool error result or a
scope left behind fails the demo (exit status 1).
"""

from __future__ import annotations

import argparse
import uuid
from typing import TextIO

from turnkeep.cli.printer import StreamPrinter, describe
from turnkeep.harness import HarnessDeps, TurnResult
from turnkeep.harness.local_owner import run_owned_turn
from turnkeep.harness.orchestrator import ToolOutcome
from turnkeep.harness.state import (
    CHECKPOINT_NS,
    MEMO_NS,
    frames_address,
    load_record,
    load_state,
    op_scope,
    response_id,
)
from turnkeep.runtime.build import open_local_runtime
from turnkeep.runtime.settings import local_settings

DEMO_USER = "demo-user"
DEMO_SCRIPT: tuple[str, ...] = (
    "hello turnkeep",
    "remember the deploy region is eu-west-1",
    'call calculator {"expression": "6*7"}\n'
    "call clock_now {}\n"
    "then\n"
    'call echo {"text": "second round, two calls"}\n'
    'call calculator {"expression": "2**10"}',
    "remember the answer is 42",
    "what do you remember?",
)

AGENT_SCRIPT: tuple[str, ...] = (
    "hello turnkeep",
    "remember the deploy region is eu-west-1",
    "what do you remember?",
)
"""What the demo runs with `--agent`: only the working-notes tools, which every agent has."""


DEMO_LEGEND = """\
The model is `scripted`: a deterministic offline model that calls real tools through the same
path as Bedrock or an OpenAI-compatible model would. Each turn prints:
  user>       the message sent
  assistant>  the model's reply, as it streams
  ->          a tool call the model made      <-  its result ([ok] or [error])
  [turn ...]  how the turn ended: status, model rounds, tokens
  [scope ...] whether the turn's progress (streamed frames, tool checkpoints) was retired
              by its final commit, as it must be
"""


def _scope_left(deps: HarnessDeps, session_id: str, result: TurnResult) -> int:
    """Frames still stored in the operation's scope (0 once retired)."""
    storage = deps.open_storage(session_id)
    try:
        left = sum(
            len(storage.read_list(frames_address(result.op_id, response_id(result.op_id, r))))
            for r in range(result.rounds + 1)
        )
        for namespace in (CHECKPOINT_NS, MEMO_NS):
            left += len(storage.scan_values(namespace, "", op_scope(result.op_id)))
        # The operation state must be gone and the result record present.
        ended = load_state(storage, result.op_id) is None
        left += int(not ended or load_record(storage, result.op_id) is None)
        return left
    finally:
        storage.close()


def _agent_tools(deps: HarnessDeps, session_id: str, out: TextIO) -> int:
    """Print the agent's tools as `GET /agent` lists them; the number of sources left out."""
    registry = deps.registry(session_id, DEMO_USER)
    shown = ", ".join(
        f"{name} ({registry.source_of(name) or 'function'})" for name in registry.names
    )
    out.write(f"agent {deps.agent.name}: tools {shown}\n")
    for problem in registry.problems:
        out.write(f"agent {deps.agent.name}: without {problem.source}: {problem.message}\n")
    out.write(
        "The demo calls only the working-notes tools of this agent (its own tools need "
        "arguments only you know: try them with `turnkeep chat --agent ...`).\n"
    )
    return len(registry.problems)


def run_demo(args: argparse.Namespace, out: TextIO) -> int:
    """Run DEMO_SCRIPT as turns of one new session and check each operation scope is gone."""
    # The demo's script is written for the scripted model; --delay shapes it (the spec is
    # recorded with each turn, so a resumed turn streams the same way).
    model = f"scripted?delay_ms={round(args.delay * 1000)}"
    settings = local_settings(model=model, agent=args.agent)
    runtime = open_local_runtime(settings)
    deps, envelopes, storage_url = runtime.deps, runtime.envelopes, runtime.storage_url
    session_id = f"demo-{uuid.uuid4().hex[:12]}"
    envelopes.create(session_id, DEMO_USER, {"title": "turnkeep demo"})
    out.write(f"turnkeep demo: session {session_id} in {storage_url}\n")
    out.write(DEMO_LEGEND)
    printer = StreamPrinter(out)
    failures = 0
    tool_errors: list[ToolOutcome] = []

    def on_tool(outcome: ToolOutcome) -> None:
        printer.on_tool(outcome)
        if outcome.is_error:
            tool_errors.append(outcome)

    script = DEMO_SCRIPT
    try:
        if settings.agent:
            script = AGENT_SCRIPT
            failures += _agent_tools(deps, session_id, out)
        for text in script:
            out.write("\nuser> " + text.replace("\n", "\n      ") + "\n")
            result = run_owned_turn(
                deps,
                session_id,
                DEMO_USER,
                text,
                model=model,
                on_event=printer.on_event,
                on_tool=on_tool,
            )
            out.write(describe(result) + "\n")
            left = _scope_left(deps, session_id, result)
            out.write(
                f"[scope {result.op_id}: "
                + ("retired, nothing left]" if left == 0 else f"NOT retired: {left} items]")
                + "\n"
            )
            failures += int(result.status != "completed" or left != 0) + len(tool_errors)
            tool_errors.clear()
        envelope = envelopes.get(session_id)
        notes = envelope.working_notes if envelope is not None else None
        out.write(f"\nworking notes folded into the next turn:\n{notes or '(none)'}\n")
        storage = deps.open_storage(session_id)
        try:
            stats = storage.get_stats()
        finally:
            storage.close()
        out.write(
            f"session {session_id}: {stats.message_count} transcript messages, "
            f"{stats.usage_rows} model rounds\n"
        )
    finally:
        runtime.close()
    out.write("demo " + ("OK" if failures == 0 else f"FAILED ({failures} problems)") + "\n")
    return 0 if failures == 0 else 1
