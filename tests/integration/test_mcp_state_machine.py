"""An agent with an MCP server on Step Functions (moto runs the real state machine and
handlers): the turn's tool steps call the function tool and the MCP tool of a real server on
127.0.0.1; a server that is down is left out of the turn, which completes with the agent's own
tools and says so; a model step that cannot list a required server fails retryably and is run
again by the state machine's retry policy (the retries running out is tested locally, without
the policy's waits: test_mcp_agent_turns.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.mcp_agent import REFERENCE, REQUIRED_ENV, URL_ENV, fresh_agent_module
from tests.support.mcp_servers import HttpMcpServer, free_port
from tests.support.state_machine import Deployed, assert_ended, run_turn
from turnkeep.aws_lambda import container
from turnkeep.storage import open_storage


@pytest.fixture
def kb(monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpMcpServer]:
    """The MCP server, and the test agent pointed at it (set before `deployed` builds)."""
    with HttpMcpServer("kb") as server:
        monkeypatch.setenv(URL_ENV, server.url)
        monkeypatch.setenv("TURNKEEP_AGENT", REFERENCE)
        fresh_agent_module()
        yield server
    fresh_agent_module()


def test_a_turn_of_an_agent_calls_its_function_tool_and_an_mcp_tool_in_tool_steps(
    kb: HttpMcpServer, deployed: Deployed
) -> None:
    session = "sfn-mcp"
    op_id, output = run_turn(
        deployed, session, 'call kb_lookup {"term": "deploy"}\ncall shout {"text": "go"}'
    )
    assert output["status"] == "completed"
    invoked = [name for name, _event, _error in deployed.host.calls]
    assert invoked.count("ToolStepFunction") == 2
    assert container.runtime().deps.agent.name == "mcp_test"
    with open_storage(deployed.storage_url, session) as storage:
        texts = json.dumps([e.data for e in storage.scan_entries()])
    assert "deploy: 2 entries" in texts
    assert "GO" in texts
    assert kb.methods["tools/call"] == 1
    # One container (this process) listed once; every later step reused the listing.
    assert kb.methods["tools/list"] == 1
    assert_ended(deployed, session, op_id, "completed")


def test_a_turn_whose_mcp_server_is_down_completes_without_its_tools_and_says_so(
    kb: HttpMcpServer, deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_ENV, f"http://127.0.0.1:{free_port()}/mcp")
    fresh_agent_module()
    container.reset_runtime()
    session = "sfn-mcp-down"

    op_id, output = run_turn(deployed, session, 'call shout {"text": "go"}')

    assert output["status"] == "completed"
    assert all(error is None for _name, _event, error in deployed.host.calls)
    with open_storage(deployed.storage_url, session) as storage:
        entries = storage.scan_entries()
    (notice,) = [e for e in entries if e.type == "tool_source_unavailable"]
    assert notice.data["source"] == "kb"
    assert "cannot list its tools" in notice.data["message"]
    assert "GO" in json.dumps([e.data for e in entries])
    assert_ended(deployed, session, op_id, "completed")


@pytest.mark.parametrize("deployed", ["STANDARD"], indirect=True)  # the retry waits up to 2 s
def test_a_model_step_that_cannot_list_a_required_server_is_retried_by_the_state_machine(
    kb: HttpMcpServer, deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    monkeypatch.setenv(URL_ENV, f"http://127.0.0.1:{port}/mcp")
    monkeypatch.setenv(REQUIRED_ENV, "1")
    fresh_agent_module()
    container.reset_runtime()
    late = HttpMcpServer("kb", port=port)
    original = deployed.host.handlers["ModelStepFunction"]

    def then_start(event: dict[str, Any], context: Any) -> Any:
        try:
            return original(event, context)
        finally:
            if not late.started:
                late.__enter__()  # the server comes up after the first attempt failed

    try:
        with deployed.replaced("ModelStepFunction", then_start):
            op_id, output = run_turn(deployed, "sfn-mcp-late", 'call kb_lookup {"term": "x"}')
    finally:
        if late.started:
            late.__exit__(None, None, None)
    assert output["status"] == "completed"
    model_steps = [c for c in deployed.host.calls if c[0] == "ModelStepFunction"]
    assert model_steps[0][2] == "RetryableStepError"
    assert model_steps[1][1] == model_steps[0][1]  # the same input again
    assert all(error is None for _name, _event, error in model_steps[1:])
    assert late.methods["tools/call"] == 1
    assert_ended(deployed, "sfn-mcp-late", op_id, "completed")
