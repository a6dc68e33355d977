"""The tool step's outputs, built from a call state or a settled result entry. Internal to
`turnkeep.harness.steps`."""

from __future__ import annotations

from typing import Any

from turnkeep.harness import approvals
from turnkeep.harness.io import ToolStepInput, ToolStepOutput
from turnkeep.harness.state import CallState
from turnkeep.harness.transcript import message_from_json
from turnkeep.providers.base import ToolResultPart


def tool_output(inp: ToolStepInput, status: str, call: CallState | None = None) -> ToolStepOutput:
    """The output for `status`, with `call`'s error, replay and interruption flags."""
    return ToolStepOutput(
        session_id=inp.session_id,
        op_id=inp.op_id,
        call_id=inp.call_id,
        status=status,  # type: ignore[arg-type]
        is_error=call.is_error if call is not None else False,
        replayed=call.replayed if call is not None else False,
        interrupted=call.interrupted if call is not None else False,
    )


def awaiting_output(inp: ToolStepInput, call: CallState, now: float) -> ToolStepOutput:
    """The output of a call parked for a person: the wait lasts until its request times out."""
    approval = call.approval
    seconds = approvals.remaining_seconds(approval, now) if approval else 1
    return ToolStepOutput(
        session_id=inp.session_id,
        op_id=inp.op_id,
        call_id=inp.call_id,
        status="awaiting_approval",
        approval_timeout_seconds=seconds,
    )


def settled_tool_output(inp: ToolStepInput, data: Any) -> ToolStepOutput:
    """What the first delivery did, read from the result entry its call became."""
    meta = data if isinstance(data, dict) else {}
    parts = message_from_json(meta.get("message")).parts
    return ToolStepOutput(
        session_id=inp.session_id,
        op_id=inp.op_id,
        call_id=inp.call_id,
        status="done",
        is_error=any(isinstance(p, ToolResultPart) and p.is_error for p in parts),
        replayed=bool(meta.get("replayed")),
        interrupted=bool(meta.get("interrupted")),
    )
