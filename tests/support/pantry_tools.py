"""The pantry agent of the tool-state tests: tools that keep stock in `ToolContext.state`
(module level, so worker processes and Lambda tool steps import them by name).

`TURNKEEP_AGENT=tests.support.pantry_tools:agent` (with the repository on PYTHONPATH)."""

from __future__ import annotations

import asyncio
import os

from turnkeep import Agent, ToolContext, tool

FACTORY_CALLS: list[int] = []
"""One element per call of `pantry_deps` in this process (the factory runs once a process)."""


def pantry_deps() -> dict[str, object]:
    """The agent's dependencies: built once per process."""
    FACTORY_CALLS.append(os.getpid())
    return {"shop": "corner shop", "pid": os.getpid()}


@tool
def put_away(item: str, qty: int, ctx: ToolContext) -> str:
    """Put `qty` of `item` in the pantry."""
    stock = ctx.state.get("stock", {})
    assert isinstance(stock, dict)
    stock[item] = int(stock.get(item, 0)) + qty
    ctx.state.set("stock", stock)
    return f"put away {qty} {item}"


@tool
async def check_stock(item: str, pantry: ToolContext) -> str:
    """How many of `item` the pantry holds (an async tool; the context under another name)."""
    await asyncio.sleep(0)
    stock = pantry.state.get("stock", {})
    assert isinstance(stock, dict)
    return f"{item}: qty {stock.get(item, 0)}"


@tool
def use_up(item: str, ctx: ToolContext) -> str:
    """Take every `item` out of the pantry."""
    stock = ctx.state.get("stock", {})
    assert isinstance(stock, dict)
    stock.pop(item, None)
    ctx.state.set("stock", stock)
    ctx.state.delete("note")
    return f"used up {item}"


@tool
def hoard(kib: int, ctx: ToolContext) -> str:
    """Store a note of `kib` KiB (over the state's caps it fails)."""
    ctx.state.set("note", "x" * (kib * 1024))
    return f"stored {kib} KiB"


@tool
def whoami(ctx: ToolContext) -> dict[str, object]:
    """The call's context as the tool sees it."""
    deps = ctx.deps
    assert isinstance(deps, dict)
    return {
        "session_id": ctx.session_id,
        "user_id": ctx.user_id,
        "turn_id": ctx.turn_id,
        "call_id": ctx.call_id,
        "shop": deps["shop"],
        "deps_pid": deps["pid"],
        "pid": os.getpid(),
        "factory_calls_here": len(FACTORY_CALLS),
    }


@tool
def dump_pantry(kb: int) -> str:
    """Everything in the pantry, as a long listing of about `kb` KB."""
    lines, size, n = [], 0, 0
    while size < kb * 1000:
        line = f"shelf {n:05}: rice, oats, tea, beans"
        lines.append(line)
        size += len(line) + 1
        n += 1
    return "\n".join(lines)


agent = Agent(
    name="pantry",
    instructions="You keep the pantry.",
    tools=[put_away, check_stock, use_up, hoard, whoami, dump_pantry],
    deps=pantry_deps,
)
