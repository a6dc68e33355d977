"""The pantry scenario through the state machine under moto: the tool step (the real handler,
TURNKEEP_AGENT as the template's AgentRef sets it) commits a call's state writes with its
result in DynamoDB, so a later turn's tool step — another invocation — reads them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.state_machine import Deployed, run_turn
from turnkeep.aws_lambda import container
from turnkeep.harness.state import load_head
from turnkeep.harness.transcript import branch_messages
from turnkeep.providers.base import ToolResultPart
from turnkeep.tools.state import load_state

SESSION = "pantry-sfn"


@pytest.fixture
def pantry_agent(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TURNKEEP_AGENT", "tests.support.pantry_tools:agent")
    container.reset_runtime()
    yield
    container.reset_runtime()  # the next test's runtime is built from its own environment


@pytest.mark.parametrize("deployed", ["STANDARD"], indirect=True)
def test_put_away_then_check_stock_gives_the_same_quantity_through_the_state_machine(
    deployed: Deployed, pantry_agent: None
) -> None:
    run_turn(deployed, SESSION, 'call put_away {"item": "rice", "qty": 2}')
    container.reset_runtime()  # a new container: nothing of the first turn's process is kept
    run_turn(deployed, SESSION, 'call check_stock {"item": "rice"}')

    storage = container.runtime().deps.open_storage(SESSION)
    try:
        messages = branch_messages(storage, load_head(storage))
        state = load_state(storage)
    finally:
        storage.close()
    results = [p.content for m in messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert results == ["put away 2 rice", "rice: qty 2"]
    assert state == {"stock": {"rice": 2}}
    tool_steps = [e for name, e, _ in deployed.host.calls if name == "ToolStepFunction"]
    assert len(tool_steps) == 2
