"""Human approval of tool calls: which calls need one, parking a call, recording a decision,
and what a decided call does (docs/approvals.md).

A call needs approval when its tool is registered with `requires_approval` or the session's
host key `toolApproval` (comma-separated names, `*` = every tool) names it. `tool_step` parks
such a call (`phase="awaiting"`, an `approval_requested` entry, envelope `awaiting_approval`)
and returns `awaiting_approval`; the orchestrator waits without running anything. A decision
is committed into the call state (fenced by the operation state: an ended turn takes none);
the next `tool_step` of the call applies it: approve/edit run the tool once, deny/timeout give
the model an error result saying so.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from turnkeep.envelope import EnvelopeConflictError, turn_run_id, turn_status
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.errors import FencedWriteError, HarnessError
from turnkeep.harness.progress import fenced_commit
from turnkeep.harness.state import (
    ApprovalChoice,
    ApprovalDecision,
    CallApproval,
    CallState,
    OperationState,
    call_address,
    load_call,
    load_record,
    load_state,
    op_scope,
    response_id,
)
from turnkeep.storage import JsonValue, Storage, Value, Write, insert_entry, set_value, value
from turnkeep.tools.base import ToolResult
from turnkeep.tools.registry import ToolRegistry

POLICY_META_KEY: Final = "toolApproval"
APPROVAL_REQUESTED: Final = "approval_requested"
APPROVAL_DECIDED: Final = "approval_decided"
TOKEN_NS: Final = "approval.token"
REASON_MAX_CHARS: Final = 2000


class ApprovalError(HarnessError):
    """A decision that cannot be taken; `status` is the HTTP status the API answers."""

    status = 400


class ApprovalNotFoundError(ApprovalError):
    """No such turn, call, or approval request."""

    status = 404


class ApprovalUnavailableError(ApprovalError):
    """The decision cannot be checked now (an edited call's tool source cannot list)."""

    status = 503


class ApprovalConflictError(ApprovalError):
    """Already decided, or the turn ended or is being cancelled."""

    status = 409


class ApprovalInvalidError(ApprovalError):
    """Edited arguments that do not fit the tool's schema (or a missing field)."""

    status = 422


def policy_names(meta: Mapping[str, object]) -> frozenset[str]:
    """The tool names the session's `toolApproval` host key lists (`*` stays `*`)."""
    raw = meta.get(POLICY_META_KEY)
    if not isinstance(raw, str):
        return frozenset()
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def needs_approval(registry: ToolRegistry, meta: Mapping[str, object], name: str) -> bool:
    """Whether a call of `name` must wait for a person (tool flag or session policy)."""
    if registry.requires_approval(name):
        return True
    names = policy_names(meta)
    return "*" in names or name in names


def token_address(op_id: str, call_id: str) -> Value:
    """The Step Functions task token of a parked call, in the operation scope."""
    return value(TOKEN_NS, call_id, op_scope(op_id))


def remaining_seconds(approval: CallApproval, now: float) -> int:
    """Whole seconds (at least 1) until the request times out."""
    return max(1, math.ceil(approval.expires_at - now))


def arguments_json(arguments: str) -> JsonValue:
    """A call's arguments as JSON for its events (the text itself when it is not JSON)."""
    return _arguments_json(arguments)


def _arguments_json(arguments: str) -> JsonValue:
    try:
        parsed: JsonValue = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return arguments
    return parsed


def park(
    deps: HarnessDeps, storage: Storage, state: OperationState, call: CallState
) -> CallState | None:
    """Record `call` as awaiting a decision (plus its `approval_requested` entry) and mark the
    envelope `awaiting_approval`. None if the turn ended meanwhile (fenced)."""
    now = deps.clock()
    parked = call.model_copy(
        update={
            "phase": "awaiting",
            "approval": CallApproval(
                requested_at=now, expires_at=now + deps.limits.approval_timeout_seconds
            ),
        }
    )
    parent = response_id(state.op_id, call.round)
    entry = insert_entry(
        f"{parent}:{call.call_id}:approval",
        parent,
        APPROVAL_REQUESTED,
        {
            "op": state.op_id,
            "round": call.round,
            "call_id": call.call_id,
            "name": call.name,
            "arguments": _arguments_json(call.arguments),
            "expires_at": parked.approval.expires_at if parked.approval else now,
        },
    )
    try:
        fenced_commit(
            storage,
            state.op_id,
            [
                set_value(call_address(state.op_id, call.call_id), parked.model_dump(mode="json")),
                entry,
            ],
        )
    except FencedWriteError:
        return None
    _set_status(deps, state.session_id, state.op_id, "running", "awaiting_approval")
    _follow_up(deps, state.session_id, "running", "awaiting_approval")
    return parked


def awaiting_calls(storage: Storage, state: OperationState) -> list[CallState]:
    """Calls of the current round that wait for a decision (none made yet)."""
    found: list[CallState] = []
    for call_id in state.pending_call_ids:
        call = load_call(storage, state.op_id, call_id)
        if call is not None and call.phase == "awaiting" and _undecided(call):
            found.append(call)
    return found


def _undecided(call: CallState) -> bool:
    return call.approval is not None and call.approval.decision is None


def refresh_status(deps: HarnessDeps, storage: Storage, state: OperationState) -> None:
    """After a decision took effect: `running` again once no call of the round awaits one."""
    if not awaiting_calls(storage, state):
        _set_status(deps, state.session_id, state.op_id, "awaiting_approval", "running")
        _follow_up(deps, state.session_id, "awaiting_approval", "running")


def mark_awaiting(deps: HarnessDeps, session_id: str, op_id: str) -> None:
    """Assert `awaiting_approval` (the orchestrator, once a round's other calls are done)."""
    _set_status(deps, session_id, op_id, "running", "awaiting_approval")


def mark_running(deps: HarnessDeps, session_id: str, op_id: str) -> None:
    """`running` again after `awaiting_approval` (a parent whose child's request was decided)."""
    _set_status(deps, session_id, op_id, "awaiting_approval", "running")


def _follow_up(deps: HarnessDeps, session_id: str, old: str, new: str) -> None:
    """A child turn's pause (or its end) shown on the turns above it: on Step Functions a
    parent waits for its child's execution, so no step of its own would say it waits for a
    person (docs/approvals.md, "Inside a sub-agent"). Other sessions cost no request."""
    from turnkeep.harness.subagents import MAX_LINK_DEPTH, load_link

    link = load_link(deps, session_id)
    for _ in range(MAX_LINK_DEPTH):
        if link is None:
            return
        _set_status(deps, link.parent_session_id, link.parent_op_id, old, new)
        link = load_link(deps, link.parent_session_id)


def _set_status(deps: HarnessDeps, session_id: str, op_id: str, old: str, new: str) -> None:
    # Only this turn, only from `old`: a cancel (`cancelling`) or a terminal status wins.
    with contextlib.suppress(EnvelopeConflictError):
        deps.envelopes.update_worker_meta(
            session_id,
            {"turnStatus": new},
            expect={"turnStatus": [old], "turnRunId": [op_id], "turnFinishing": [None]},
        )


def expire(
    deps: HarnessDeps, storage: Storage, state: OperationState, call: CallState, *, force: bool
) -> CallState:
    """`call` with a `timeout` decision committed if it is due (or `force`: the state machine's
    wait timed out); unchanged otherwise. Raises FencedWriteError if the turn ended."""
    approval = call.approval
    if approval is None or approval.decision is not None:
        return call
    now = deps.clock()
    if not force and now < approval.expires_at:
        return call
    decided = _with_decision(
        call, ApprovalDecision(decision="timeout", decided_at=now, reason=None)
    )
    fenced_commit(storage, state.op_id, _decision_writes(state, call, decided))
    return decided


def _with_decision(call: CallState, decision: ApprovalDecision) -> CallState:
    if call.approval is None:
        raise HarnessError(f"call {call.call_id!r} has no approval request")
    return call.model_copy(
        update={"approval": call.approval.model_copy(update={"decision": decision})}
    )


def _decision_writes(state: OperationState, before: CallState, after: CallState) -> list[Write]:
    decision = after.approval.decision if after.approval is not None else None
    if decision is None:
        raise HarnessError(f"call {before.call_id!r} has no decision to record")
    parent = response_id(state.op_id, before.round)
    data: dict[str, JsonValue] = {
        "op": state.op_id,
        "round": before.round,
        "call_id": before.call_id,
        "name": before.name,
        "decision": decision.decision,
        "reason": decision.reason,
        "decided_by": decision.decided_by,
        "arguments": _arguments_json(before.arguments),
    }
    if decision.arguments is not None:
        data["edited_arguments"] = _arguments_json(decision.arguments)
    return [
        set_value(call_address(state.op_id, before.call_id), after.model_dump(mode="json")),
        insert_entry(f"{parent}:{before.call_id}:decision", parent, APPROVAL_DECIDED, data),
    ]


@dataclass(frozen=True, slots=True)
class Decided:
    """A committed decision and the task token a Step Functions wait left (None locally)."""

    call: CallState
    token: str | None


def decide(
    deps: HarnessDeps,
    session_id: str,
    op_id: str,
    call_id: str,
    *,
    user_id: str,
    decision: ApprovalChoice,
    reason: str | None = None,
    arguments: Mapping[str, object] | None = None,
) -> Decided:
    """Commit a person's decision on a parked call (the turn is woken by the caller).

    Raises ApprovalNotFoundError (no such turn/call/request, or another user's turn),
    ApprovalConflictError (decided already, the turn ended or is being cancelled),
    ApprovalInvalidError (edit without arguments, or arguments the tool's schema rejects).
    """
    if decision == "timeout":
        raise ApprovalInvalidError("decision: 'timeout' is recorded by the harness, not sent")
    if reason is not None and len(reason) > REASON_MAX_CHARS:
        raise ApprovalInvalidError(
            f"reason: is {len(reason)} characters; the cap is {REASON_MAX_CHARS} (never cut)"
        )
    storage = deps.open_storage(session_id)
    try:
        state = load_state(storage, op_id)
        if state is None:
            if load_record(storage, op_id) is not None:
                raise ApprovalConflictError(
                    f"turn {op_id!r} has ended; the decision changes nothing"
                )
            raise ApprovalNotFoundError(f"turn {op_id!r} not found")
        if state.user_id != user_id:
            raise ApprovalNotFoundError(f"turn {op_id!r} not found")
        call = load_call(storage, op_id, call_id)
        if call is None or call.approval is None:
            raise ApprovalNotFoundError(f"turn {op_id!r} has no approval request {call_id!r}")
        if call.approval.decision is not None or call.phase != "awaiting":
            raise ApprovalConflictError(
                f"call {call_id!r} was already decided "
                f"({call.approval.decision.decision if call.approval.decision else 'applied'})"
            )
        envelope = deps.envelopes.get(session_id)
        meta = envelope.meta if envelope is not None else {}
        if turn_run_id(meta) == op_id and turn_status(meta) == "cancelling":
            raise ApprovalConflictError(f"turn {op_id!r} is being cancelled")
        edited: str | None = None
        if decision == "edit":
            edited = _checked_arguments(deps, state, call, arguments)
        made = ApprovalDecision(
            decision=decision,
            reason=reason,
            arguments=edited,
            decided_by=user_id,
            decided_at=deps.clock(),
        )
        decided = _with_decision(call, made)
        try:
            fenced_commit(storage, op_id, _decision_writes(state, call, decided))
        except FencedWriteError:
            raise ApprovalConflictError(
                f"turn {op_id!r} has ended; the decision changes nothing"
            ) from None
        stored = storage.get_value(token_address(op_id, call_id))
        token = stored.value if stored is not None and isinstance(stored.value, str) else None
        return Decided(decided, token)
    finally:
        storage.close()


def _checked_arguments(
    deps: HarnessDeps,
    state: OperationState,
    call: CallState,
    arguments: Mapping[str, object] | None,
) -> str:
    if arguments is None:
        raise ApprovalInvalidError("arguments: an edit needs the arguments to run the call with")
    text = json.dumps(dict(arguments), ensure_ascii=False)
    registry = deps.registry(state.session_id, state.user_id)
    unavailable = registry.unavailable_error(call.name)
    if unavailable is not None:
        # The edit cannot be checked now: the API answers 503 and nothing is decided.
        raise ApprovalUnavailableError(
            f"arguments: the edit of {call.name} cannot be checked now ({unavailable}); "
            "nothing was decided, try again"
        )
    parsed = registry.parse_arguments(call.name, text)
    if isinstance(parsed, ToolResult):
        raise ApprovalInvalidError(f"arguments: {parsed.content}")
    return text


def denial_text(call: CallState, decision: ApprovalDecision, timeout_seconds: float) -> str:
    """The tool result the model sees for a denied or timed-out call."""
    if decision.decision == "timeout":
        return (
            f"Error: the call of {call.name} was denied: nobody approved it within "
            f"{timeout_seconds:.0f} s (timed out). It did not run."
        )
    why = f": {decision.reason}" if decision.reason else " (no reason given)"
    return f"Error: the user denied this call of {call.name}{why}. It did not run."


def effective_arguments(call: CallState) -> str:
    """The arguments the call runs with: the person's edit if any, else the model's."""
    decision = call.approval.decision if call.approval is not None else None
    if decision is not None and decision.decision == "edit" and decision.arguments is not None:
        return decision.arguments
    return call.arguments


def edited_note(call: CallState) -> str | None:
    """A line telling the model its arguments were edited (None when they were not)."""
    arguments = effective_arguments(call)
    if arguments == call.arguments:
        return None
    return f"[the user edited the arguments before approving; the call ran with: {arguments}]"


def store_token(storage: Storage, op_id: str, call_id: str, token: str) -> None:
    """Keep a wait's task token in the operation scope (fenced: FencedWriteError once ended)."""
    fenced_commit(storage, op_id, [set_value(token_address(op_id, call_id), token)])


def tokens_of(storage: Storage, state: OperationState) -> list[str]:
    """Task tokens of the round's parked calls (to release their waits)."""
    tokens: list[str] = []
    for call_id in state.pending_call_ids:
        stored = storage.get_value(token_address(state.op_id, call_id))
        if stored is not None and isinstance(stored.value, str):
            tokens.append(stored.value)
    return tokens


def latest_expiry(storage: Storage, state: OperationState) -> float | None:
    """When the last undecided request of the round times out (None: nothing awaits)."""
    calls = awaiting_calls(storage, state)
    return max((c.approval.expires_at for c in calls if c.approval), default=None)


def approval_pause_seconds(storage: Storage, state: OperationState) -> float:
    """How long the round's calls waited for decisions (first request to last decision)."""
    requested: list[float] = []
    decided: list[float] = []
    for call_id in state.pending_call_ids:
        call = load_call(storage, state.op_id, call_id)
        if call is None or call.approval is None or call.approval.decision is None:
            continue
        requested.append(call.approval.requested_at)
        decided.append(call.approval.decision.decided_at)
    if not requested:
        return 0.0
    return max(0.0, max(decided) - min(requested))


def hold_wait(
    deps: HarnessDeps,
    session_id: str,
    op_id: str,
    call_id: str,
    token: str,
    *,
    release: Callable[[str], None],
) -> str:
    """Keep a Step Functions wait's task token for the decision route, or release it at once.

    Released now (`release(token)`: SendTaskSuccess) when nothing is left to wait for: the turn
    ended, the call is decided or was applied. The token is stored first and the call read
    after, so a decision committed at any moment is seen by this step or finds the token.
    Returns `waiting` or `released`.
    """
    storage = deps.open_storage(session_id)
    try:
        state = load_state(storage, op_id)
        call = load_call(storage, op_id, call_id) if state is not None else None
        if state is None or call is None or not _undecided(call):
            release(token)
            return "released"
        try:
            store_token(storage, op_id, call_id, token)
        except FencedWriteError:
            release(token)
            return "released"
        again = load_call(storage, op_id, call_id)
        if again is None or not _undecided(again):
            release(token)
            return "released"
        mark_awaiting(deps, session_id, op_id)
        return "waiting"
    finally:
        storage.close()
