"""A user's typed agent for the CLI tests: its turns end with a `Verdict` (docs/agent.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from turnkeep import Agent


class Verdict(BaseModel):
    """How an issue is classified."""

    label: Literal["bug", "feature"]
    confidence: float


agent = Agent(
    name="triager",
    description="Classifies an issue.",
    instructions="Classify the issue; submit the verdict with final_result.",
    output_type=Verdict,
)
