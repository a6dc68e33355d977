"""Module-level function tools for the tests (a worker process imports them by name)."""

from __future__ import annotations

import asyncio
import time
from enum import Enum
from typing import Literal

from pydantic import BaseModel

from turnkeep import ToolContext, tool


class Size(Enum):
    SMALL = "small"
    LARGE = "large"


class Line(BaseModel):
    sku: str
    qty: int = 1


@tool
def order_summary(
    customer: str,
    lines: list[Line],
    size: Size = Size.SMALL,
    gift: bool | None = None,
    speed: Literal["standard", "express"] = "standard",
) -> dict[str, object]:
    """Summarise an order for a customer.

    The summary counts the items.

    Args:
        customer: Who orders,
            by name.
        lines (list): The order lines.
        speed: How fast it ships.

    Returns:
        A summary.
    """
    return {
        "customer": customer,
        "items": sum(line.qty for line in lines),
        "size": size.value,
        "gift": gift,
        "speed": speed,
    }


@tool(replay_safe=True, isolation="process")
async def async_double(n: int, ctx: ToolContext) -> str:
    """Double a number, asynchronously."""
    await asyncio.sleep(0)
    return f"{n * 2} (call {ctx.call_id})"


@tool(timeout_seconds=0.3)
def slow_sync(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "woke"


@tool(timeout_seconds=0.3)
async def slow_async(seconds: float) -> str:
    """Sleep asynchronously, then answer."""
    await asyncio.sleep(seconds)
    return "woke"


@tool
def fails(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


@tool
def not_json() -> object:
    """Returns something that is not JSON."""
    return object()


def bare_add(a: int, b: int = 2) -> int:
    """Add two numbers."""
    return a + b
