"""The agent of the console timeline test: a tool that takes a visible while, and one a person
approves (`TURNKEEP_AGENT=tests.support.timeline_agent:agent`, the repository on PYTHONPATH)."""

from __future__ import annotations

import time

from turnkeep import Agent, tool


@tool
def brew(seconds: float) -> str:
    """Brew a pot of coffee, taking `seconds` (at most 2)."""
    time.sleep(max(0.0, min(seconds, 2.0)))
    return f"brewed in {seconds} s"


@tool
def announce(text: str) -> str:
    """Tell the office (the console asks a person first: the session's approval host key)."""
    return f"announced: {text}"


agent = Agent(name="office", instructions="You run the office kitchen.", tools=[brew, announce])
