"""Agents with sub-agents for the tests: `triage` hands tasks to `writer` and `researcher`.

`writer`'s `wait_for_go` tool blocks until the file `go` exists in `$SUBAGENT_FLAG_DIR` (after
appending a line to `started` there), so a test can kill the server in the middle of a child
turn and let the resumed child finish."""

from __future__ import annotations

import os
import time
from pathlib import Path

from turnkeep import Agent, tool


def _flags() -> Path:
    return Path(os.environ.get("SUBAGENT_FLAG_DIR", "."))


@tool(replay_safe=True, isolation="in_process")
def wait_for_go() -> str:
    """Wait until the test says go."""
    flags = _flags()
    with (flags / "started").open("a", encoding="utf-8") as out:
        out.write("started\n")
    deadline = time.monotonic() + 120
    while not (flags / "go").exists():
        if time.monotonic() > deadline:
            return "gave up waiting"
        time.sleep(0.05)
    return "went"


@tool
def count_words(text: str) -> int:
    """Count the words of a text.

    Args:
        text: The text.
    """
    return len(text.split())


writer = Agent(
    name="writer",
    description="Writes the changelog of a release.",
    instructions="You write changelogs.",
    tools=[wait_for_go],
)

researcher = Agent(
    name="researcher",
    description="Looks things up.",
    instructions="You research.",
    tools=[count_words],
)

agent = Agent(
    name="triage",
    description="Hands each task to the right specialist.",
    tools=[count_words],  # a function tool beside the sub-agents (bench/subagent_call.py)
    agents=[writer, researcher.as_tool(name="research", description="Research a question.")],
)
