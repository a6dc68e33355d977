"""The example agent on Step Functions: the real definition executed by moto and the real
handlers with TURNKEEP_AGENT set as the template's AgentRef sets it. Its sync and async function
tools run in the tool step, its gated tool waits for an approval through the API Lambda, and a
bad reference fails the handler module's import (the container's init error)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from turnkeep_agents.release_assistant.docs_server import build_server

from tests.support.lambda_host import load_function_module
from tests.support.mcp_servers import HttpMcpServer
from tests.support.state_machine import (
    Deployed,
    api_caller,
    finished_execution,
    run_turn,
    tool_results,
)
from turnkeep.aws_lambda import container
from turnkeep.harness.state import load_head, load_state
from turnkeep.harness.transcript import branch_messages
from turnkeep.providers.base import ToolResultPart
from turnkeep.runtime.agent_loading import forget_agents
from turnkeep.runtime.config_errors import ConfigError

AGENT = "turnkeep_agents.release_assistant:agent"
STANDARD_ONLY = pytest.mark.parametrize("deployed", ["STANDARD"], indirect=True)
SESSION = "sample-session"  # the sample API events' session, owned by their `sub`


@pytest.fixture
def with_agent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    log = tmp_path / "published.jsonl"
    monkeypatch.setenv("TURNKEEP_AGENT", AGENT)
    monkeypatch.setenv("RELEASE_ASSISTANT_LOG", str(log))
    # The agent's docs MCP server, on 127.0.0.1 (each step lists it).
    with HttpMcpServer(server=build_server("docs")) as docs:
        monkeypatch.setenv("TURNKEEP_MCP_URLS", json.dumps({"docs": docs.url}))
        container.reset_runtime()
        yield log
        container.reset_runtime()  # the next test's runtime is built from its own environment


@STANDARD_ONLY
def test_the_example_agents_function_tools_run_in_the_tool_steps(
    deployed: Deployed, with_agent: Path
) -> None:
    op_id, _output = run_turn(
        deployed,
        "rel-sfn",
        'call lookup_ticket {"ticket_id": "REL-102"}\ncall check_ci {"branch": "main", "limit": 1}',
    )

    deps = container.runtime().deps
    assert deps.agent.name == "release_assistant"
    storage = deps.open_storage("rel-sfn")
    try:
        messages = branch_messages(storage, load_head(storage))
        assert load_state(storage, op_id) is None  # ended
    finally:
        storage.close()
    results = [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert json.loads(results[0].content)["id"] == "REL-102"
    assert json.loads(results[1].content) == [
        {"run": 8812, "commit": "9f3c2e1", "status": "passed", "duration_s": 612}
    ]
    tool_steps = [e for name, e, _ in deployed.host.calls if name == "ToolStepFunction"]
    assert len(tool_steps) == 2


@STANDARD_ONLY
def test_the_example_agents_gated_tool_waits_for_an_approval_through_the_api_lambda(
    deployed: Deployed, with_agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = api_caller(deployed, monkeypatch)
    assert call("POST", "/sessions", {"session_id": SESSION})[0] == 201
    status, started = call(
        "POST",
        f"/sessions/{SESSION}/turns",
        {"text": 'call publish_release_notes {"version": "2.4.0", "notes": "- fixes"}'},
    )
    assert status == 202, started
    turn = started["turn_id"]
    deadline = time.monotonic() + 30
    pending: list[dict[str, object]] = []
    while not pending and time.monotonic() < deadline:
        pending = call("GET", "/approvals", None)[1]["approvals"]
        time.sleep(0.05)
    assert [p["tool"] for p in pending] == ["publish_release_notes"]
    assert not with_agent.exists()  # nothing published before the decision
    agent = call("GET", "/agent", None)[1]
    assert agent["name"] == "release_assistant"

    decided = call(
        "POST",
        f"/sessions/{SESSION}/turns/{turn}/approvals/{pending[0]['call_id']}",
        {"decision": "approve"},
    )

    assert decided[0] == 202, decided
    assert finished_execution(deployed, turn)["status"] == "SUCCEEDED"
    (result,) = tool_results(call, turn)
    assert result["content"].startswith("published 2.4.0 to the internal changelog")
    assert len(with_agent.read_text().splitlines()) == 1


def test_a_bad_agent_reference_fails_the_handler_modules_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TURNKEEP_AGENT", "turnkeep_agents.nope:agent")
    forget_agents()

    for folder in ("turn_steps", "api"):
        with pytest.raises(ConfigError) as raised:
            load_function_module(folder)
        assert str(raised.value) == (
            "TURNKEEP_AGENT='turnkeep_agents.nope:agent' is not accepted: no module named "
            "'turnkeep_agents.nope' (agents live in shared/turnkeep_agents/, docs/agent.md)"
        )
