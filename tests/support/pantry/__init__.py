"""A user's own agent for the tests, as a new user writes one (issue #28's trial): function tools
(a nested model, a list of them) and the `grocer` MCP server of its own (`grocer.py`, built with
the `mcp` SDK), over Streamable HTTP at $TURNKEEP_PANTRY_GROCER_URL (default: nothing listens) or
over stdio (`stdio_agent`).

References: `tests.support.pantry:agent`, `:stdio_agent`, `:clashing_agent` (a function tool
`grocer_price` beside the server's `price`, no allow list: the clash is found at listing). The
variable is read when the module is imported (`fresh_pantry_module`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pydantic import BaseModel

from turnkeep import Agent, mcp_server, tool
from turnkeep.mcp.source import McpServer

GROCER_URL_ENV = "TURNKEEP_PANTRY_GROCER_URL"
REFERENCE = "tests.support.pantry:agent"
ROOT = Path(__file__).resolve().parents[3]


class Ingredient(BaseModel):
    name: str
    qty: int = 1


@tool
def put_away(item: str, qty: int) -> str:
    """Put groceries away in the pantry.

    Args:
        item: What is put away.
        qty: How many.
    """
    return f"put away {qty} x {item}"


@tool
def plan_meal(name: str, ingredients: list[Ingredient]) -> dict[str, object]:
    """Plan a meal from ingredients."""
    return {"meal": name, "items": sum(i.qty for i in ingredients)}


def _grocer(allow: list[str] | None) -> McpServer:
    url = os.environ.get(GROCER_URL_ENV, "http://127.0.0.1:9/mcp")
    return mcp_server("grocer", url=url, allow=allow, cache_ttl_seconds=0, list_timeout_seconds=5)


INSTRUCTIONS = "You are the pantry assistant. Answer in one sentence."

agent = Agent(
    name="pantry",
    instructions=INSTRUCTIONS,
    tools=[put_away, plan_meal],
    mcp_servers=[_grocer(["price", "stock"])],
)

stdio_agent = Agent(
    name="pantry_stdio",
    instructions=INSTRUCTIONS,
    tools=[put_away],
    mcp_servers=[
        mcp_server(
            "grocer",
            command=sys.executable,
            args=["-m", "tests.support.pantry.grocer", "--transport", "stdio"],
            cwd=str(ROOT),
            env={"PYTHONPATH": str(ROOT / "shared") + os.pathsep + str(ROOT)},
        )
    ],
)


@tool(name="grocer_price")
def own_price(item: str) -> str:
    """The pantry's own price list."""
    return f"{item}: 1.00"


clashing_agent = Agent(
    name="pantry_clash",
    instructions=INSTRUCTIONS,
    tools=[put_away, own_price],
    mcp_servers=[_grocer(None)],
)


def fresh_pantry_module() -> None:
    """Forget this module and the loaded agents, so the next load reads the URL again."""
    from turnkeep.runtime.agent_loading import forget_agents

    sys.modules.pop(__name__, None)
    forget_agents()
