"""ACME's release triage: a typed agent that delegates to two sub-agents (docs/agent.md,
"Sub-agents" and "Typed results").

It asks the readiness checker (`check_readiness`, whose result is a typed `Readiness`, handed
back as JSON) whether a release may ship and the changelog writer (`write_changelog`, plain
text) for its changelog, then submits its own `Triage` through `final_result`. Each sub-agent
call is a child turn of its own.

Run it: `turnkeep chat --agent turnkeep_agents.release_assistant.triage:agent`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from turnkeep import Agent
from turnkeep_agents.release_assistant.readiness import agent as readiness
from turnkeep_agents.release_assistant.writer import writer

INSTRUCTIONS = """\
You triage one ACME web shop release for the release manager. Ask check_readiness whether the
release is ready (give it the version and its ticket ids); when it is, ask write_changelog for
the changelog of those tickets. Then submit your decision with final_result: ship when the
readiness verdict says ready, hold otherwise, with each blocker's id and the changelog when
there is one."""


class Triage(BaseModel):
    """The triage decision on one release."""

    version: str = Field(description="the release version, e.g. 2.4.0")
    action: Literal["ship", "hold"]
    blockers: list[str] = Field(
        default_factory=list, description="the ids of what stops the release"
    )
    changelog: str | None = Field(default=None, description="the writer's changelog, if any")


agent = Agent(
    name="release_triage",
    description="Decides whether an ACME release ships, with its changelog, as a Triage object.",
    instructions=INSTRUCTIONS,
    output_type=Triage,
    model_settings={"temperature": 0.0, "max_tokens": 1024},
    agents=[
        readiness.as_tool(
            name="check_readiness",
            description="Check whether a release is ready to ship: give it the version and "
            "its ticket ids; it answers with a Readiness verdict as JSON.",
        ),
        writer.as_tool(
            name="write_changelog",
            description="Write the changelog of a release from its ticket ids.",
        ),
    ],
)
