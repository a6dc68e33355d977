"""The tool step's child-turn phase on Step Functions (`HarnessLimits.child_turns ==
"execution"`): a sub-agent call's child turn is started here and the step answers `child_turn`;
the state machine then waits on a task token while the child runs as an execution of its own
(`turnkeep.harness.subagent_waits`), so no Lambda stays up meanwhile, and delivers the step
again (`approval=child_ended`) to record the child's result as the call's
(docs/step-functions.md, "Sub-agents").
"""

from __future__ import annotations

import dataclasses

from turnkeep.agent.subagent import SubAgent, SubAgentInput
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.io import FailTurnInput, ToolStepInput, ToolStepOutput
from turnkeep.harness.state import CallState, OperationState, call_address
from turnkeep.harness.steps.tool_outputs import tool_output
from turnkeep.harness.subagents import ChildTurn, answer, child_record, start_child
from turnkeep.storage import GuardFailedError, Storage, set_value
from turnkeep.tools.base import ToolResult
from turnkeep.tools.registry import ToolRegistry

EXPRESS_REFUSAL = (
    "Error: {name} is a sub-agent, and this deployment runs turns as Express workflows, which "
    "cannot wait for a child turn (sub-agents need WorkflowType STANDARD). The call did not run."
)


def child_turn_step(
    deps: HarnessDeps,
    storage: Storage,
    inp: ToolStepInput,
    *,
    state: OperationState,
    call: tuple[CallState, int],
    sub: SubAgent,
    arguments: str,
    registry: ToolRegistry,
) -> ToolStepOutput:
    """Start the call's child turn and answer `child_turn` (the execution runs it), or record
    the result of a child turn that ended; under EXPRESS a tool error, clearly."""
    current, seq = call
    if deps.limits.workflow_type == "EXPRESS":
        refusal = ToolResult(EXPRESS_REFUSAL.format(name=sub.name), is_error=True)
        return _done(storage, inp, state, call, refusal)
    parsed = registry.parse_arguments(current.name, arguments)
    if isinstance(parsed, ToolResult):  # bad arguments: the model sees why, no child starts
        return _done(storage, inp, state, call, parsed)
    task = parsed.input if isinstance(parsed, SubAgentInput) else str(parsed)
    link, inner = start_child(
        deps, sub, task, session_id=state.session_id, op_id=state.op_id, call_id=current.call_id
    )
    record = child_record(inner, link)
    if record is None and inp.approval == "child_ended":
        # Its execution ended without the child turn ending (it failed past every retry, or
        # never started): end the child honestly, then answer that.
        from turnkeep.harness.steps.terminal import fail_turn

        fail_turn(
            inner,
            FailTurnInput(
                session_id=link.session_id,
                op_id=link.op_id,
                error="its execution ended before the turn did",
            ),
        )
        record = child_record(inner, link)
    if record is not None:
        ended = link.model_copy(
            update={"status": record.status, "usage": dataclasses.asdict(record.usage)}
        )
        result = answer(inner, sub, ended, record.status, record.error)
        return _done(storage, inp, state, call, result, child=ended)
    if current.phase != "started":
        started = current.model_copy(
            update={"phase": "started", "attempts": current.attempts + 1, "started_at": None}
        )
        if _write(storage, state, current, started, seq) is None:
            return tool_output(inp, "skipped")  # another delivery got there, or the turn ended
    return ToolStepOutput(
        session_id=inp.session_id,
        op_id=inp.op_id,
        call_id=inp.call_id,
        status="child_turn",
        child_wait_seconds=child_wait_seconds(deps),
    )


def child_wait_seconds(deps: HarnessDeps) -> int:
    """How long a parent waits for a child turn before looking itself: the child's wall clock
    twice (its wrap-up round and retries fit) plus 10 minutes. Only a child whose end was not
    handed back (its last step died past every retry) makes a parent wait that long."""
    return int(2 * deps.limits.wall_clock_seconds + 600)


def child_call(call: CallState, deps: HarnessDeps) -> SubAgent | None:
    """The sub-agent a call of `deps.agent` calls, when its child runs as an execution."""
    if deps.limits.child_turns != "execution":
        return None
    return next((sub for sub in deps.agent.agents if sub.name == call.name), None)


def _done(
    storage: Storage,
    inp: ToolStepInput,
    state: OperationState,
    call: tuple[CallState, int],
    result: ToolResult,
    *,
    child: ChildTurn | None = None,
) -> ToolStepOutput:
    """Record the call's result (its child turn's, or an error saying why none ran)."""
    before, seq = call
    done = before.model_copy(
        update={
            "phase": "done",
            "content": result.content,
            "is_error": result.is_error,
            "child": child.model_dump(mode="json") if child is not None else None,
        }
    )
    if _write(storage, state, before, done, seq) is None:
        return tool_output(inp, "skipped")
    return tool_output(inp, "done", done)


def _write(
    storage: Storage, state: OperationState, before: CallState, after: CallState, seq: int
) -> int | None:
    """Write `after` only while the call state is still the version at `seq`."""
    address = call_address(state.op_id, before.call_id)
    try:
        result = storage.commit(
            [set_value(address, after.model_dump(mode="json"))], guard=address, guard_seq=seq
        )
    except GuardFailedError:
        return None
    return result.seqs[0]
