"""ACME's release assistant: an example agent (`turnkeep_agents.release_assistant:agent`)."""

from turnkeep_agents.release_assistant.assistant import agent

__all__ = ["agent"]
