"""The tool step's approval phase: park a call that needs a person, apply the decision made
on it (deny, time out, approve, edit), and say which arguments the call runs with. The tool
step's one door to `turnkeep.harness.approvals` for these (docs/approvals.md)."""

from __future__ import annotations

from dataclasses import dataclass

from turnkeep.envelope import Envelope
from turnkeep.harness import approvals
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.errors import FencedWriteError
from turnkeep.harness.io import ToolStepInput, ToolStepOutput
from turnkeep.harness.progress import fenced_commit
from turnkeep.harness.state import CallState, OperationState, call_address
from turnkeep.harness.steps.tool_outputs import awaiting_output, tool_output
from turnkeep.storage import Storage, set_value
from turnkeep.telemetry import genai
from turnkeep.tools.registry import ToolRegistry


@dataclass(frozen=True, slots=True)
class Cleared:
    """A call free to run (no approval needed, or approved): what it runs with."""

    call: CallState
    arguments: str
    """The arguments the call runs with (a person's edit replaces the model's)."""
    note: str | None
    """Tells the model its arguments were edited (None: they were not)."""


def clear_for_run(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    call: CallState,
    inp: ToolStepInput,
    *,
    registry: ToolRegistry,
    envelope: Envelope | None,
) -> ToolStepOutput | Cleared:
    """The call cleared to run, or the step's output when it waits for, or was refused by,
    a person (or the turn ended meanwhile)."""
    meta = envelope.meta if envelope is not None else {}
    if (
        call.phase == "pending"
        and call.approval is None
        and approvals.needs_approval(registry, meta, call.name)
    ):
        return _gate(deps, storage, state, call, inp)
    if call.phase == "awaiting":
        decided = _apply_decision(deps, storage, state, call, inp)
        if isinstance(decided, ToolStepOutput):
            return decided
        call = decided
    return Cleared(call, approvals.effective_arguments(call), approvals.edited_note(call))


def _apply_decision(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    call: CallState,
    inp: ToolStepInput,
) -> ToolStepOutput | CallState:
    """An awaiting call after its decision (a due timeout is decided now): back to `pending`
    when approved, else the step's output (still waiting, or answered as refused)."""
    try:
        call = approvals.expire(deps, storage, state, call, force=inp.approval == "timed_out")
    except FencedWriteError:
        return tool_output(inp, "skipped")
    decision = call.approval.decision if call.approval is not None else None
    if decision is None:
        return awaiting_output(inp, call, deps.clock())
    if call.approval is not None:
        genai.approval_span(
            state.trace_parent,
            op_id=state.op_id,
            call_id=call.call_id,
            name=call.name,
            requested_at=call.approval.requested_at,
            decided_at=decision.decided_at,
            decision=decision.decision,
        )
    if decision.decision in ("deny", "timeout"):
        denied = call.model_copy(
            update={
                "phase": "done",
                "is_error": True,
                "content": approvals.denial_text(
                    call, decision, deps.limits.approval_timeout_seconds
                ),
            }
        )
        if not _fenced_session_commit(storage, state.op_id, call, denied):
            return tool_output(inp, "skipped")
        approvals.refresh_status(deps, storage, state)
        return tool_output(inp, "done", denied)
    # Approved (or edited): back to `pending` so it runs like any other call.
    approvals.refresh_status(deps, storage, state)
    return call.model_copy(update={"phase": "pending"})


def _gate(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    call: CallState,
    inp: ToolStepInput,
) -> ToolStepOutput:
    """Park a call that needs approval (or, under Express, fail it clearly)."""
    if deps.limits.workflow_type == "EXPRESS":
        # An Express workflow cannot wait on a task token (docs/approvals.md).
        failed = call.model_copy(
            update={
                "phase": "done",
                "is_error": True,
                "content": f"Error: {call.name} needs a person's approval, and this deployment "
                "runs turns as Express workflows, which cannot wait for one (approvals need "
                "WorkflowType STANDARD). The call did not run.",
            }
        )
        if not _fenced_session_commit(storage, state.op_id, call, failed):
            return tool_output(inp, "skipped")
        return tool_output(inp, "done", failed)
    parked = approvals.park(deps, storage, state, call)
    if parked is None:
        return tool_output(inp, "skipped")
    return awaiting_output(inp, parked, deps.clock())


def _fenced_session_commit(
    storage: Storage, op_id: str, before: CallState, after: CallState
) -> bool:
    """Write a call state only while the operation runs (guarded by its operation state)."""
    address = call_address(op_id, before.call_id)
    try:
        fenced_commit(storage, op_id, [set_value(address, after.model_dump(mode="json"))])
    except FencedWriteError:
        return False
    return True
