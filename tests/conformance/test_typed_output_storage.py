"""Conformance: a typed turn's validated result is stored with its turn record on every
backend — the largest result allowed (non-ASCII, nested) is read back whole by a new handle,
and a failed turn keeps its `output_invalid` code — and completes with it on every envelope
backend (docs/agent.md, "Typed results")."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.conformance.backends import BackendHarness
from tests.conformance.envelope_backends import BACKEND_NAMES, envelope_backend
from turnkeep import Agent
from turnkeep.agent.output import MAX_OUTPUT_BYTES
from turnkeep.envelope import open_envelope_store
from turnkeep.harness import HarnessDeps, HarnessLimits, run_turn
from turnkeep.harness.state import load_record
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import open_storage


class Report(BaseModel):
    title: str
    lines: list[str]


def _deps(backend: BackendHarness, agent: Agent) -> HarnessDeps:
    envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
    envelopes.create("typed", "u")
    return HarnessDeps(
        open_storage=backend.open,
        envelopes=envelopes,
        provider=ScriptedProvider(),
        limits=HarnessLimits(frame_interval_ms=0),
        agent=agent,
    )


def _largest_report() -> dict[str, object]:
    """A report whose compact JSON is just under the output cap, of 4-byte characters."""
    line = "🥫 é" * 50
    report: dict[str, object] = {"title": "Lagerbestand ✓", "lines": []}
    while len(json.dumps(report, ensure_ascii=False).encode()) + 500 < MAX_OUTPUT_BYTES:
        report["lines"].append(line)  # type: ignore[attr-defined]
    return report


def test_the_validated_result_is_stored_with_the_turn_and_read_back_whole(
    backend: BackendHarness,
) -> None:
    report = _largest_report()
    deps = _deps(backend, Agent(output_type=Report))

    result = run_turn(deps, "typed", "u", f"call final_result {json.dumps(report)}")

    assert result.status == "completed", result.error
    backend.close_all()
    record = load_record(backend.open("typed"), result.op_id)
    assert record is not None
    assert record.output == report


def test_a_turn_failed_output_invalid_keeps_its_code_and_no_output(
    backend: BackendHarness,
) -> None:
    deps = _deps(backend, Agent(output_type=Report, output_retries=0))

    result = run_turn(deps, "typed", "u", 'call final_result {"title": 3}')

    assert result.status == "failed"
    backend.close_all()
    record = load_record(backend.open("typed"), result.op_id)
    assert record is not None
    assert (record.error_code, record.output) == ("output_invalid", None)


@pytest.mark.parametrize("envelopes", BACKEND_NAMES)
def test_a_typed_turn_completes_with_its_object_on_every_envelope_backend(
    envelopes: str, tmp_path: Path
) -> None:
    url = f"memory://{uuid.uuid4().hex}"
    with envelope_backend(envelopes, tmp_path) as stores:
        store = stores.store()
        store.create("typed", "u")
        deps = HarnessDeps(
            open_storage=lambda sid: open_storage(url, sid),
            envelopes=store,
            provider=ScriptedProvider(),
            limits=HarnessLimits(frame_interval_ms=0),
            agent=Agent(output_type=Report),
        )

        result = run_turn(deps, "typed", "u", 'call final_result {"title": "t", "lines": []}')

        envelope = stores.store().get("typed")
    assert result.status == "completed", result.error
    assert result.output == {"title": "t", "lines": []}
    assert envelope is not None
    assert envelope.meta.get("turnStatus") == "completed"
    with open_storage(url, "typed") as storage:
        record = load_record(storage, result.op_id)
    assert record is not None
    assert record.output == {"title": "t", "lines": []}
