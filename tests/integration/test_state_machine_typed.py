"""A typed agent on Step Functions: the real definition executed by moto and the real handlers
with TURNKEEP_AGENT naming it. An invalid result goes back to the model from the model step
(no tool step runs for `final_result`), a valid one ends the execution with the object in its
output and the turn record; past the retries the turn fails `output_invalid`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.state_machine import Deployed, run_turn
from turnkeep.aws_lambda import container
from turnkeep.harness.state import load_record

AGENT = "tests.support.typed_agent:agent"
VALID = 'call final_result {"label": "feature", "confidence": 0.5}'
INVALID = 'call final_result {"label": "feature"}'


@pytest.fixture
def typed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TURNKEEP_AGENT", AGENT)
    container.reset_runtime()
    yield
    container.reset_runtime()  # the next test's runtime is built from its own environment


def _record(session: str, op_id: str) -> object:
    storage = container.runtime().deps.open_storage(session)
    try:
        return load_record(storage, op_id)
    finally:
        storage.close()


def test_a_typed_turn_retries_an_invalid_result_and_ends_with_the_object(
    deployed: Deployed, typed: None
) -> None:
    op_id, output = run_turn(deployed, "typed-sfn", f"{INVALID}\nthen\n{VALID}")

    expected = {"label": "feature", "confidence": 0.5}
    assert output["status"] == "completed"
    assert output["output"] == expected
    record = _record("typed-sfn", op_id)
    assert getattr(record, "output", None) == expected
    steps = [name for name, _e, _r in deployed.host.calls]
    assert "ToolStepFunction" not in steps  # validated where the round settles
    assert steps.count("ModelStepFunction") == 2


def test_a_typed_turn_past_its_retries_fails_output_invalid(
    deployed: Deployed, typed: None
) -> None:
    op_id, output = run_turn(deployed, "typed-sfn", f"{INVALID}\nthen\n{INVALID}\nthen\n{INVALID}")

    assert output["status"] == "failed"
    assert output["error_code"] == "output_invalid"
    assert "confidence: Field required" in output["error"]
    assert getattr(_record("typed-sfn", op_id), "error_code", None) == "output_invalid"
