"""Sub-agent calls as child turns (docs/agent.md, "Sub-agents").

A call of a sub-agent tool runs a turn of the sub-agent in a **child session** of its own: ids
derived from (parent session, parent turn, call id), so a delivery of the call that runs again
after a crash (the tool is replay-safe) finds the same child turn and resumes it from storage
instead of starting another. The child has its own op id and scope (retired by its own terminal
commit), instructions, tools, sources and model, and its own transcript; the parent's transcript
keeps only the call and its result (the child's validated result as JSON where it has a typed
one, else its final text). Cancelling the parent cancels the child: the child's driver looks at
the parent's envelope before each of its steps.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from turnkeep.agent.definition import Agent
from turnkeep.agent.subagent import SubAgent, SubAgentInput
from turnkeep.envelope import EnvelopeExistsError
from turnkeep.envelope.keys import turn_run_id, turn_status
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.errors import HarnessError
from turnkeep.harness.io import StartTurnInput
from turnkeep.harness.state import CALL_NS, CallState, TurnRecord, load_record
from turnkeep.harness.transcript import entry_message
from turnkeep.providers.base import Usage
from turnkeep.storage import Storage, set_value, value
from turnkeep.tools.base import Tool, ToolContext, ToolResult

CHILD_SESSION_PREFIX: Final = "sub-"
"""Every child session's id starts with it (`child_ids`)."""

MAX_LINK_DEPTH: Final = 8
"""Deeper than any definition allows (`max_agent_depth`): a walk up the links always ends."""

PARENT_NS: Final = "subagent.parent"
"""Session value of a child session (key `link`): the parent session, turn and call."""


class ChildTurn(BaseModel):
    """Where a sub-agent call's child turn lives and how it ended (None while running)."""

    model_config = ConfigDict(extra="ignore")

    agent: str
    path: list[str] = Field(default_factory=list)
    """The sub-agent names from the deployment's agent down to this one (which runs the
    child's steps where one process serves every agent: Lambda)."""
    session_id: str
    op_id: str
    parent_session_id: str
    parent_op_id: str
    call_id: str
    status: str | None = None
    usage: dict[str, Any] | None = None


def child_ids(session_id: str, op_id: str, call_id: str) -> tuple[str, str]:
    """The child session id and child op id of one sub-agent call (deterministic)."""
    digest = hashlib.sha256(f"{session_id}\0{op_id}\0{call_id}".encode()).hexdigest()
    return f"{CHILD_SESSION_PREFIX}{digest[:40]}", f"op-sub-{digest[40:64]}"


def subagent_tools(deps: HarnessDeps) -> list[Tool[Any]]:
    """One tool per sub-agent of `deps.agent`, bound to `deps` (which runs the child turns)."""
    return [_subagent_tool(deps, sub) for sub in deps.agent.agents]


def _subagent_tool(deps: HarnessDeps, sub: SubAgent) -> Tool[SubAgentInput]:
    def handler(args: SubAgentInput, ctx: ToolContext) -> ToolResult:
        return run_child(deps, sub, args.input, ctx)

    return Tool(
        name=sub.name,
        description=sub.description,
        args_model=SubAgentInput,
        handler=handler,
        # Running it again resumes the same child turn from storage (its ids are derived).
        replay_safe=True,
        # It drives a turn with this process's storage and provider: never in a worker.
        isolation="in_process",
    )


def child_deps(deps: HarnessDeps, sub: SubAgent) -> HarnessDeps:
    """The parent's harness with the sub-agent as its agent (its own tools, not a hook's)."""
    return dataclasses.replace(deps, agent=sub.agent, tools=None)


def run_child(deps: HarnessDeps, sub: SubAgent, task: str, ctx: ToolContext) -> ToolResult:
    """Start (or find again) the call's child turn, drive it to its end here, answer its
    result (in-process: `turnkeep serve`, `chat`; docs/agent.md, "Sub-agents").

    `ctx.extras["child"]` receives the `ChildTurn` so the tool step can record it."""
    from turnkeep.harness.orchestrator import resume_turn

    link, inner = start_child(
        deps, sub, task, session_id=ctx.session_id, op_id=ctx.operation_id, call_id=ctx.call_id
    )
    # Driven again after a pause for the child's approval: the parent runs meanwhile.
    resumed_parent(deps, ctx.session_id, ctx.operation_id)
    result = resume_turn(
        inner,
        link.session_id,
        link.op_id,
        before_step=lambda: follow_parent_cancel(deps, inner, link),
    )
    if result.status == "awaiting_approval":
        # The parent pauses with it: the tool step parks the call (harness/child_approvals.py).
        ctx.extras["child_awaiting"] = result.approval_wait_seconds or 1
    ended = link.model_copy(
        update={"status": result.status, "usage": dataclasses.asdict(result.usage)}
    )
    ctx.extras["child"] = ended.model_dump(mode="json")
    return answer(inner, sub, ended, result.status, result.error)


def resumed_parent(deps: HarnessDeps, session_id: str, op_id: str) -> None:
    """The parent turn `running` again (from `awaiting_approval` only: a cancel wins)."""
    from turnkeep.harness.approvals import mark_running

    mark_running(deps, session_id, op_id)


def start_child(
    deps: HarnessDeps, sub: SubAgent, task: str, *, session_id: str, op_id: str, call_id: str
) -> tuple[ChildTurn, HarnessDeps]:
    """The call's child session and started child turn (both made once: a delivery that runs
    again finds them), and the harness that runs it."""
    from turnkeep.harness.steps import start_turn

    user_id = _parent_user(deps, session_id)
    child_session, child_op = child_ids(session_id, op_id, call_id)
    parent = load_link(deps, session_id)
    link = ChildTurn(
        agent=sub.name,
        path=[*(parent.path if parent is not None else []), sub.name],
        session_id=child_session,
        op_id=child_op,
        parent_session_id=session_id,
        parent_op_id=op_id,
        call_id=call_id,
    )
    inner = child_deps(deps, sub)
    _ensure_child_session(inner, link, user_id)
    start_turn(
        inner,
        StartTurnInput(
            session_id=child_session,
            op_id=child_op,
            user_id=user_id,
            text=task,
            model=sub.agent.model,
        ),
    )
    return link, inner


def _parent_user(deps: HarnessDeps, session_id: str) -> str:
    envelope = deps.envelopes.get(session_id)
    if envelope is None:
        raise HarnessError(f"session {session_id!r} does not exist")
    return envelope.owner_id


def load_link(deps: HarnessDeps, session_id: str) -> ChildTurn | None:
    """A child session's link to its parent call (None for any other session, which the id
    tells without a request)."""
    if not session_id.startswith(CHILD_SESSION_PREFIX):
        return None
    storage = deps.open_storage(session_id)
    try:
        stored = storage.get_value(value(PARENT_NS, "link"))
    finally:
        storage.close()
    return ChildTurn.model_validate(stored.value) if stored is not None else None


def deps_for_session(deps: HarnessDeps, session_id: str) -> HarnessDeps:
    """The harness that runs `session_id`'s turns: for a child session, its sub-agent (found
    down its link's path from `deps.agent`), else `deps`. Where one process runs the steps of
    every agent's turns (Lambda), each step of a child turn starts here (one read)."""
    if not deps.agent.agents:
        return deps
    link = load_link(deps, session_id)
    if link is None:
        return deps
    agent, sub = deps.agent, None
    for name in link.path:
        sub = subagent_named(agent, name)
        if sub is None:
            raise HarnessError(
                f"session {session_id!r} is a child turn of sub-agent "
                f"{' -> '.join(link.path)}, which agent {deps.agent.name!r} no longer has"
            )
        agent = sub.agent
    return child_deps(deps, sub) if sub is not None else deps


def child_record(deps: HarnessDeps, link: ChildTurn) -> TurnRecord | None:
    """The child turn's terminal record, None while it runs."""
    storage = deps.open_storage(link.session_id)
    try:
        return load_record(storage, link.op_id)
    finally:
        storage.close()


def subagent_named(agent: Agent, name: str) -> SubAgent | None:
    """`agent`'s sub-agent offered as tool `name`, if any."""
    return next((sub for sub in agent.agents if sub.name == name), None)


def _ensure_child_session(deps: HarnessDeps, link: ChildTurn, user_id: str) -> None:
    title = f"sub-agent {link.agent} of {link.parent_session_id}"[:200]
    try:
        # The parent marker rides in the create: listings hide the child, a delete finds it.
        deps.envelopes.create(
            link.session_id, user_id, {"title": title}, parent_session_id=link.parent_session_id
        )
    except EnvelopeExistsError:
        return  # a delivery that runs again: the child exists
    storage = deps.open_storage(link.session_id)
    try:
        storage.commit([set_value(value(PARENT_NS, "link"), link.model_dump(mode="json"))])
    finally:
        storage.close()


def follow_parent_cancel(parent: HarnessDeps, child: HarnessDeps, link: ChildTurn) -> None:
    """Cancel the child turn when its parent turn is being cancelled (before each child step)."""
    from turnkeep.harness.steps import cancel_turn

    envelope = parent.envelopes.get(link.parent_session_id)
    meta = envelope.meta if envelope is not None else {}
    cancelled = turn_run_id(meta) != link.parent_op_id or turn_status(meta) in (
        "cancelling",
        "aborted",
    )
    if cancelled:
        try:
            cancel_turn(child, link.session_id, link.op_id)
        except HarnessError:
            return  # the child already ended, or never started


def answer(
    deps: HarnessDeps, sub: SubAgent, link: ChildTurn, status: str, error: str | None
) -> ToolResult:
    """The tool result of a child turn that ended `status` (or paused for an approval)."""
    if status == "completed":
        return ToolResult(_completed_answer(deps, link))
    if status == "aborted":
        return ToolResult(f"Error: sub-agent {sub.name} was cancelled", True)
    if status == "awaiting_approval":
        # Only where no tool step parks the call (it pauses the parent with the child).
        return ToolResult(f"Error: sub-agent {sub.name} waits for a person's approval", True)
    return ToolResult(f"Error: sub-agent {sub.name} failed: {error or status}", True)


def _completed_answer(deps: HarnessDeps, link: ChildTurn) -> str:
    """A completed child's validated result as JSON when it has a typed one, else its final
    text (docs/agent.md, "Sub-agents")."""
    storage = deps.open_storage(link.session_id)
    try:
        record = load_record(storage, link.op_id)
        if record is None:
            return _NO_TEXT
        if record.output is not None:
            return json.dumps(record.output, ensure_ascii=False)
        if record.final_entry_id is None:
            return _NO_TEXT
        entries = storage.get_entries([record.final_entry_id])
    finally:
        storage.close()
    message = entry_message(entries[0]) if entries else None
    return (message.text if message is not None else "") or _NO_TEXT


_NO_TEXT = "(the sub-agent answered with no text)"


def usage_of(link: ChildTurn) -> Usage:
    """The child turn's usage as recorded in its link."""
    return Usage(**link.usage) if link.usage else Usage()


def cancel_children(deps: HarnessDeps, storage: Storage, session_id: str, op_id: str) -> list[str]:
    """Cancel the running child turns of turn `op_id`'s unsettled sub-agent calls (each one's
    own children too); returns the approval waits to release (docs/approvals.md)."""
    from turnkeep.harness.steps import cancel_turn

    if not deps.agent.agents:
        return []
    tokens: list[str] = []
    for stored in storage.scan_values(CALL_NS, f"{op_id}/"):
        call = CallState.model_validate(stored.value)
        sub = subagent_named(deps.agent, call.name)
        if sub is None or call.phase == "done":
            continue
        child_session, child_op = child_ids(session_id, op_id, call.call_id)
        if deps.envelopes.get(child_session) is None:
            continue  # not started: the cancelled parent's tool step will not start it
        try:
            tokens += cancel_turn(child_deps(deps, sub), child_session, child_op).wake_tokens
        except HarnessError:
            continue  # it ended, or never got its first commit
    return tokens
