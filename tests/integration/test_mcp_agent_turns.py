"""An agent with an MCP server, through the local harness: the turn calls a function tool and
an MCP tool; a server that is down is left out of the turn, which says so, and is used again
once it is back; a required one that cannot be listed fails the round retryably, then the
turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.turns_support import USER, make_turn_harness
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
    harness = make_turn_harness(tmp_path, "sqlite")
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
        "read_tool_result",
    }


def test_a_turn_whose_required_mcp_server_cannot_be_listed_fails_after_the_rounds_retries(
    tmp_path: Path,
) -> None:
    source = mcp_server("kb", url=f"http://127.0.0.1:{free_port()}/mcp", required=True)
    harness = make_turn_harness(tmp_path, "sqlite")
    harness.deps.agent = Agent(tools=[shout], mcp_servers=[source])
    waits: list[float] = []
    harness.deps.sleep = waits.append
    result = run_turn(harness.deps, harness.session_id, USER, 'call shout {"text": "x"}')
    assert result.status == "failed"
    assert "tool source 'kb': cannot list its tools: ConnectError" in (result.error or "")
    # The first attempt and the harness's model retries each tried to list (failures are
    # never cached), waiting between them; the model was never asked.
    assert source.list_requests == 1 + harness.deps.limits.model_retries
    assert len(waits) == harness.deps.limits.model_retries
    assert harness.provider.requests == []


def test_an_mcp_server_that_is_down_is_left_out_of_the_turn_and_used_again_once_back(
    tmp_path: Path,
) -> None:
    port = free_port()
    source = mcp_server(
        "kb", url=f"http://127.0.0.1:{port}/mcp", allow=["lookup"], cache_ttl_seconds=0
    )
    harness = make_turn_harness(tmp_path, "sqlite")
    harness.deps.agent = Agent(tools=[shout], mcp_servers=[source])

    down = run_turn(harness.deps, harness.session_id, USER, 'call shout {"text": "x"}')

    assert down.status == "completed"
    assert _tool_parts(harness)["shout"].content == "X"
    assert "kb_lookup" not in {t.name for t in harness.provider.requests[0].tools}
    with harness.storage() as storage:
        (notice,) = [e for e in storage.scan_entries() if e.type == "tool_source_unavailable"]
    assert notice.data["source"] == "kb"
    assert "tool source 'kb': cannot list its tools: ConnectError" in notice.data["message"]

    with HttpMcpServer("kb", port=port):
        back = run_turn(harness.deps, harness.session_id, USER, 'call kb_lookup {"term": "x"}')

    assert back.status == "completed"
    part = _tool_parts(harness)["kb_lookup"]
    assert not part.is_error, part.content


def test_an_mcp_call_awaiting_approval_whose_server_goes_down_is_checked_and_run_honestly(
    tmp_path: Path,
) -> None:
    from turnkeep.harness import resume_turn
    from turnkeep.harness.approvals import (
        ApprovalInvalidError,
        ApprovalUnavailableError,
        decide,
    )

    harness = make_turn_harness(tmp_path, "sqlite")
    with HttpMcpServer("kb") as server:
        source = mcp_server(
            "kb", url=server.url, allow=["lookup"], requires_approval=True, cache_ttl_seconds=0
        )
        harness.deps.agent = Agent(mcp_servers=[source])
        paused = run_turn(harness.deps, harness.session_id, USER, 'call kb_lookup {"term": "x"}')
        assert paused.status == "awaiting_approval"
        # Up: an edit is checked against the server's schema.
        with pytest.raises(ApprovalInvalidError, match="'term' is a required property"):
            decide(harness.deps, harness.session_id, paused.op_id, paused.awaiting_call_ids[0],
                   user_id=USER, decision="edit", arguments={"limit": 1})  # fmt: skip
    # Down (and the listing not cached): the edit cannot be checked, so nothing is decided.
    (call_id,) = paused.awaiting_call_ids
    with pytest.raises(ApprovalUnavailableError, match="tool source 'kb': cannot list its tools"):
        decide(harness.deps, harness.session_id, paused.op_id, call_id,
               user_id=USER, decision="edit", arguments={"term": "y"})  # fmt: skip
    # An approval needs no listing; the call then finds its source unavailable: a tool error.
    decide(harness.deps, harness.session_id, paused.op_id, call_id, user_id=USER,
           decision="approve")  # fmt: skip
    ended = resume_turn(harness.deps, harness.session_id, paused.op_id)
    assert ended.status in ("completed", "failed")
    part = _tool_parts(harness)["kb_lookup"]
    assert part.is_error
    assert "tool kb_lookup is unavailable: tool source 'kb'" in part.content
