"""A test agent: one function tool and the `kb` MCP server at $TURNKEEP_TEST_MCP_URL, required
when $TURNKEEP_TEST_MCP_REQUIRED is `1` (else optional, the default of `mcp_server`).

The variables are read when the module is imported; a test that changes it imports the module again
(`fresh_agent_module`)."""

from __future__ import annotations

import os
import sys

from turnkeep import Agent, mcp_server, tool

URL_ENV = "TURNKEEP_TEST_MCP_URL"
REQUIRED_ENV = "TURNKEEP_TEST_MCP_REQUIRED"
REFERENCE = "tests.support.mcp_agent:agent"


@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


agent = Agent(
    name="mcp_test",
    instructions="You are a test agent with an MCP server.",
    tools=[shout],
    mcp_servers=[
        mcp_server(
            "kb",
            url=os.environ.get(URL_ENV, "http://127.0.0.1:9/mcp"),
            allow=["lookup", "fail", "slow"],
            list_timeout_seconds=5,
            required=os.environ.get(REQUIRED_ENV) == "1",
        )
    ],
)


def fresh_agent_module() -> None:
    """Forget this module and the loaded agents, so the next load reads the URL again."""
    from turnkeep.runtime.agent_loading import forget_agents

    sys.modules.pop(__name__, None)
    forget_agents()
