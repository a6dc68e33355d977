"""Approvals inside a sub-agent's child turn reach the person through the parent's routes
(docs/approvals.md, "Inside a sub-agent"; docs/agent.md, "Sub-agents").

A child turn parks a call like any turn (its own call state, `approval_requested` entry and
`awaiting_approval` envelope). The parent's pending requests are its own parked calls plus,
through each unsettled sub-agent call of its round, the child's (and theirs), each with the
path of sub-agent names it sits under. A decision on the parent's turn for a call id the parent
does not have is looked for down that path and committed into the child that parked it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from turnkeep.harness.approvals import (
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    ApprovalNotFoundError,
    Decided,
    arguments_json,
    awaiting_calls,
    decide,
)
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.errors import FencedWriteError
from turnkeep.harness.progress import fenced_commit
from turnkeep.harness.state import (
    ApprovalChoice,
    CallState,
    OperationState,
    load_call,
    load_state,
    response_id,
)
from turnkeep.harness.subagents import child_deps, child_ids, subagent_named
from turnkeep.storage import JsonValue, Storage, Write, insert_entry

MAX_DEPTH = 8
"""Deeper than any definition allows (`max_agent_depth`), so a walk always ends."""


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """One call waiting for a person in a turn or in one of its child turns."""

    session_id: str
    op_id: str
    call: CallState
    path: list[str] = field(default_factory=list)
    """Sub-agent names from the asked turn down to the child that parked it ([] = its own)."""
    parent_call_id: str | None = None
    """The asked turn's sub-agent call the request sits under (None for its own calls)."""
    deps: HarnessDeps | None = None
    """The harness of the turn that parked it (its agent's tools check an edit)."""

    def subagent(self) -> dict[str, JsonValue] | None:
        """What marks a child's request in listings and events (None for the turn's own)."""
        if not self.path:
            return None
        return {
            "agent": self.path[-1],
            "path": list(self.path),
            "session_id": self.session_id,
            "turn_id": self.op_id,
            "call_id": self.parent_call_id,
        }


def pending_requests(deps: HarnessDeps, session_id: str, op_id: str) -> list[PendingRequest]:
    """The turn's undecided requests and those of its running child turns, depth first."""
    return _walk(deps, session_id, op_id, path=[], parent_call_id=None, depth=0)


def _walk(
    deps: HarnessDeps,
    session_id: str,
    op_id: str,
    *,
    path: list[str],
    parent_call_id: str | None,
    depth: int,
) -> list[PendingRequest]:
    storage = deps.open_storage(session_id)
    try:
        state = load_state(storage, op_id)
        if state is None:
            return []
        own = awaiting_calls(storage, state)
        calls = [load_call(storage, op_id, c) for c in state.pending_call_ids]
    finally:
        storage.close()
    found = [PendingRequest(session_id, op_id, c, path, parent_call_id, deps) for c in own]
    if depth >= MAX_DEPTH or not deps.agent.agents:
        return found
    for call in calls:
        sub = subagent_named(deps.agent, call.name) if call is not None else None
        if call is None or sub is None or call.phase == "done":
            continue
        child_session, child_op = child_ids(session_id, op_id, call.call_id)
        if deps.envelopes.get(child_session) is None:
            continue  # not started
        found += _walk(
            child_deps(deps, sub),
            child_session,
            child_op,
            path=[*path, sub.name],
            parent_call_id=parent_call_id if parent_call_id is not None else call.call_id,
            depth=depth + 1,
        )
    return found


def find_request(
    deps: HarnessDeps, session_id: str, op_id: str, call_id: str
) -> PendingRequest | None:
    """The undecided request `call_id` of a child turn under turn `op_id` (None: no child
    has one; the turn's own calls are `decide`'s to find)."""
    matches = [
        r for r in pending_requests(deps, session_id, op_id) if r.path and r.call.call_id == call_id
    ]
    return matches[0] if matches else None


def decide_in_tree(
    deps: HarnessDeps,
    session_id: str,
    op_id: str,
    call_id: str,
    *,
    user_id: str,
    decision: ApprovalChoice,
    reason: str | None = None,
    arguments: Mapping[str, object] | None = None,
) -> tuple[Decided, PendingRequest | None]:
    """`approvals.decide` on turn `op_id`'s call, or (the turn has no such request) on the
    request of that id in a child turn below it, which is returned too. Raises as `decide`
    does (ApprovalNotFoundError when no turn of the tree has the request)."""
    try:
        own = decide(
            deps,
            session_id,
            op_id,
            call_id,
            user_id=user_id,
            decision=decision,
            reason=reason,
            arguments=arguments,
        )
    except ApprovalNotFoundError:
        request = find_request(deps, session_id, op_id, call_id)
        if request is None or request.deps is None:
            raise
    else:
        return own, None
    decided = decide(
        request.deps,
        request.session_id,
        request.op_id,
        call_id,
        user_id=user_id,
        decision=decision,
        reason=reason,
        arguments=arguments,
    )
    _show_decision(deps, session_id, op_id, request, decided.call)
    return decided, request


def _show_decision(
    deps: HarnessDeps, session_id: str, op_id: str, request: PendingRequest, call: CallState
) -> None:
    """The asked turn's `approval_decided` entry for its child's request (events, console)."""
    made = call.approval.decision if call.approval is not None else None
    if made is None or request.parent_call_id is None:
        return
    storage = deps.open_storage(session_id)
    try:
        parent_call = load_call(storage, op_id, request.parent_call_id)
        if parent_call is None:
            return
        parent = response_id(op_id, parent_call.round)
        key = f"{parent}:{request.parent_call_id}:{request.session_id}:{call.call_id}"
        data: dict[str, JsonValue] = {
            "op": op_id,
            "round": parent_call.round,
            "call_id": call.call_id,
            "name": call.name,
            "decision": made.decision,
            "reason": made.reason,
            "decided_by": made.decided_by,
            "arguments": arguments_json(call.arguments),
            "subagent": request.subagent(),
        }
        if made.arguments is not None:
            data["edited_arguments"] = arguments_json(made.arguments)
        try:
            fenced_commit(
                storage, op_id, [insert_entry(f"{key}:decision", parent, APPROVAL_DECIDED, data)]
            )
        except FencedWriteError:
            return  # the parent ended meanwhile: the child's own entry records the decision
    finally:
        storage.close()


def mirror_writes(
    storage: Storage, op_id: str, round_: int, parent_call_id: str, requests: list[PendingRequest]
) -> list[Write]:
    """The parent's `approval_requested` entries for its child's requests (off the branch,
    under the round's response like its own), those not written by an earlier pause."""
    parent = response_id(op_id, round_)
    wanted = {
        f"{parent}:{parent_call_id}:{r.session_id}:{r.call.call_id}:approval": r for r in requests
    }
    written = {e.id for e in storage.get_entries(list(wanted))}
    writes: list[Write] = []
    for entry_id, request in wanted.items():
        if entry_id in written:
            continue
        approval = request.call.approval
        data: dict[str, JsonValue] = {
            "op": op_id,
            "round": round_,
            "call_id": request.call.call_id,
            "name": request.call.name,
            "arguments": arguments_json(request.call.arguments),
            "expires_at": approval.expires_at if approval is not None else None,
            "subagent": request.subagent(),
        }
        writes.append(insert_entry(entry_id, parent, APPROVAL_REQUESTED, data))
    return writes


def pause_writes(
    storage: Storage, deps: HarnessDeps, state: OperationState, call: CallState
) -> list[Write]:
    """The parent's entries showing the requests of sub-agent call `call`'s paused child
    (written with the call put back to `pending`: driven again, it resumes the same child)."""
    sub = subagent_named(deps.agent, call.name)
    if sub is None:
        return []
    child_session, child_op = child_ids(state.session_id, state.op_id, call.call_id)
    requests = _walk(
        child_deps(deps, sub),
        child_session,
        child_op,
        path=[sub.name],
        parent_call_id=call.call_id,
        depth=1,
    )
    return mirror_writes(storage, state.op_id, call.round, call.call_id, requests)
