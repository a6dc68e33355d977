"""docs/step-functions.md's retry table is the state machine definitions' Retry blocks: the
STANDARD definition's in full, which the EXPRESS definition shares."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _definition_rows(file: str = "turn.asl.json") -> list[tuple[str, ...]]:
    definition = json.loads((ROOT / "statemachine" / file).read_text())
    rows: list[tuple[str, ...]] = []

    def walk(states: dict[str, Any]) -> None:
        for name, state in states.items():
            for retry in state.get("Retry", []) if state.get("Type") == "Task" else []:
                rows.append(
                    (
                        name,
                        ", ".join(retry["ErrorEquals"]),
                        str(retry.get("IntervalSeconds", 1)),
                        str(retry.get("MaxAttempts", 3)),
                        str(float(retry.get("BackoffRate", 2.0))),
                        retry.get("JitterStrategy", "NONE"),
                    )
                )
            inner = state.get("ItemProcessor") or state.get("Iterator")
            if inner is not None:
                walk(inner["States"])
            for branch in state.get("Branches", []):
                walk(branch["States"])

    walk(definition["States"])
    return rows


def _documented_rows(marker: str = "retry-table") -> list[tuple[str, ...]]:
    text = (ROOT / "docs" / "step-functions.md").read_text()
    table = text.split(f"<!-- {marker}:start -->", 1)[1].split(f"<!-- {marker}:end -->")[0]
    lines = [line.strip() for line in table.strip().splitlines()[2:]]  # after header + rule
    return [tuple(cell.strip() for cell in line.strip("|").split("|")) for line in lines]


def test_the_documented_retry_table_matches_the_state_machine_definition() -> None:
    assert _documented_rows() == _definition_rows()


def test_the_express_definition_retries_every_task_as_the_standard_one_does() -> None:
    # The documented table is then the Express one too, less the approval wait and the
    # sub-agent's nested execution, which Express lacks.
    lacking = {"WaitForApproval", "RunChildTurn"}
    standard = [row for row in _definition_rows() if row[0] not in lacking]
    assert _definition_rows("turn.express.asl.json") == standard
