"""ACME's release readiness check: a typed agent whose every turn ends with a `Readiness`.

A workflow (or a person) asks "is 2.4 ready?" and gets an object back, not prose: the agent
looks the tickets up and checks CI with the release assistant's tools, then submits its verdict
through `final_result`; an invalid verdict goes back to it (docs/agent.md, "Typed results").

Run it: `turnkeep chat --agent turnkeep_agents.release_assistant.readiness:agent`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from turnkeep import Agent
from turnkeep_agents.release_assistant.assistant import check_ci, lookup_ticket

INSTRUCTIONS = """\
You check whether an ACME release is ready to ship. Look up each ticket the release manager
names and check CI on the release branch. A release is ready only when every ticket is done and
the latest CI run passed. Submit your verdict with final_result; name each blocker (a ticket
that is not done, a failing or missing pipeline) with its id."""


class Blocker(BaseModel):
    """One thing that stops the release."""

    kind: Literal["ticket", "ci"]
    ref: str = Field(description="the ticket id or the branch")
    reason: str


class Readiness(BaseModel):
    """The verdict on one release."""

    version: str = Field(description="the release version, e.g. 2.4.0")
    ready: bool
    blockers: list[Blocker] = Field(default_factory=list)
    summary: str = Field(description="one sentence for the release manager")


agent = Agent(
    name="release_readiness",
    description="Says whether an ACME release is ready to ship, as a Readiness object.",
    instructions=INSTRUCTIONS,
    tools=[lookup_ticket, check_ci],
    output_type=Readiness,
    output_retries=2,
    model_settings={"temperature": 0.0, "max_tokens": 1024},
    # A workflow may ask for its own shape per call (a JSON Schema in the turn start).
    turn_settings=["max_tokens", "output_schema"],
)
