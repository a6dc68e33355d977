"""An agent with an MCP server, through the local harness: the turn calls a function tool and
an MCP tool; a server that cannot be listed fails the round retryably, then the turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.turns_support import USER, make_harness
from tests.support.mcp_servers import HttpMcpServer, free_port
from turnkeep import Agent, mcp_server, tool
from turnkeep.harness.orchestrator import run_turn


@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@pytest.fixture(scope="module")
def kb() -> Iterator[HttpMcpServer]:
    with HttpMcpServer("kb") as server:
        yield server


def _tool_parts(harness: Any) -> dict[str, Any]:
    return {
        part.name: part
        for message in harness.transcript()
        if message.role == "tool"
        for part in message.parts
    }


def test_an_agents_turn_calls_a_function_tool_and_an_mcp_tool(
    kb: HttpMcpServer, tmp_path: Path
) -> None:
    agent = Agent(tools=[shout], mcp_servers=[mcp_server("kb", url=kb.url, allow=["lookup"])])
    harness = make_harness(tmp_path, "sqlite")
    harness.deps.agent = agent
    result = run_turn(
        harness.deps,
        harness.session_id,
        USER,
        'call shout {"text": "ship it"}\ncall kb_lookup {"term": "hotfix", "limit": 1}',
    )
    assert result.status == "completed"
    parts = _tool_parts(harness)
    assert parts["shout"].content == "SHIP IT"
    assert parts["kb_lookup"].content == "hotfix: 1 entries"
    offered = {spec.name for spec in harness.provider.requests[0].tools}
    assert offered == {
        "shout",
        "kb_lookup",
        "working_notes_get",
        "working_notes_update",
        "working_notes_clear",
    }


def test_a_turn_whose_mcp_server_cannot_be_listed_fails_after_the_rounds_retries(
    tmp_path: Path,
) -> None:
    source = mcp_server("kb", url=f"http://127.0.0.1:{free_port()}/mcp")
    harness = make_harness(tmp_path, "sqlite")
    harness.deps.agent = Agent(tools=[shout], mcp_servers=[source])
    result = run_turn(harness.deps, harness.session_id, USER, 'call shout {"text": "x"}')
    assert result.status == "failed"
    assert "tool source 'kb': cannot list its tools: ConnectError" in (result.error or "")
    # The first attempt and the harness's model retries each tried to list (failures are
    # never cached); the model was never asked.
    assert source.list_requests == 1 + harness.deps.limits.model_retries
    assert harness.provider.requests == []
