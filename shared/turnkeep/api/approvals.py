"""Approval routes: decide on a call that waits for a person (202), list the caller's pending
approvals across sessions (docs/approvals.md; their events are `turnkeep.events`)."""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field

from turnkeep.api.context import ApiContext, Ctx, SessionId, TurnId, User
from turnkeep.api.errors import ApiError
from turnkeep.api.launch import Launcher, StepFunctionsLauncher
from turnkeep.api.models import error_responses
from turnkeep.envelope import turn_run_id, turn_status
from turnkeep.harness.approvals import (
    REASON_MAX_CHARS,
    ApprovalConflictError,
    ApprovalError,
    ApprovalNotFoundError,
)
from turnkeep.harness.child_approvals import decide_in_tree, pending_requests

logger = logging.getLogger("turnkeep.api")

router = APIRouter(tags=["approvals"], responses=error_responses(400, 401, 404, 405, 422, 503))

CallId = Annotated[
    str,
    Path(pattern=r"^[A-Za-z0-9._:-]{1,128}$", max_length=128, description="tool call id"),
]


class DecisionRequest(BaseModel):
    """A person's decision on one call: approve, edit (run with `arguments`), or deny."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny", "edit"]
    reason: str | None = Field(default=None, max_length=REASON_MAX_CHARS)
    arguments: dict[str, Any] | None = Field(
        default=None, description="edit: the arguments to run the call with (the tool's schema)"
    )


class DecisionAccepted(BaseModel):
    """The decision is recorded; the turn goes on."""

    turn_id: str
    call_id: str
    decision: str


class PendingApproval(BaseModel):
    """One call waiting for a person."""

    session_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: Any = Field(description="the model's arguments (JSON; text if not valid JSON)")
    requested_at: int = Field(description="epoch ms")
    expires_at: int = Field(description="epoch ms: denied as timed out after this")
    subagent: dict[str, Any] | None = Field(
        default=None,
        description="a sub-agent's child turn asks (`agent`, `path` of sub-agent names, its "
        "`session_id` and `turn_id`, the parent's `call_id`); decide it on this `session_id`, "
        "`turn_id` and `call_id` like any other (docs/approvals.md, 'Inside a sub-agent')",
    )


class ApprovalList(BaseModel):
    """The caller's pending approvals across sessions, oldest first."""

    approvals: list[PendingApproval]


_STATUS_CODES = {
    404: "not_found",
    409: "approval_conflict",
    422: "invalid_decision",
    503: "unavailable",
}


@router.post(
    "/sessions/{session_id}/turns/{turn_id}/approvals/{call_id}",
    status_code=202,
    response_model=DecisionAccepted,
    responses=error_responses(409),
)
def decide_call(
    *,
    ctx: Ctx,
    user: User,
    session_id: SessionId,
    turn_id: TurnId,
    call_id: CallId,
    body: DecisionRequest,
) -> DecisionAccepted:
    """Approve, edit or deny a call that waits (202); 409 once decided or the turn ended."""
    ctx.owned(user, session_id)  # another user's session: 404
    try:
        # The turn's own call, or a request of one of its sub-agents' child turns.
        decided, _child = decide_in_tree(
            ctx.runtime.deps,
            session_id,
            turn_id,
            call_id,
            user_id=user,
            decision=body.decision,
            reason=body.reason,
            arguments=body.arguments,
        )
    except ApprovalError as exc:
        field = "arguments" if exc.status == 422 else None
        retry = {"Retry-After": "5"} if exc.status == 503 else None
        raise ApiError(
            exc.status,
            _STATUS_CODES.get(exc.status, "bad_request"),
            str(exc),
            field=field,
            headers=retry,
        ) from None
    wake(ctx.launcher, session_id, turn_id, [decided.token] if decided.token else [])
    return DecisionAccepted(turn_id=turn_id, call_id=call_id, decision=body.decision)


def wake(launcher: Launcher, session_id: str, op_id: str, tokens: list[str]) -> None:
    """Let the turn go on after a decision: release its Step Functions waits, or (locally)
    launch it again. The decision is recorded either way; a failure here is logged and the
    turn is resumed by its wait's own check, its timeout, or the next start-up."""
    try:
        if isinstance(launcher, StepFunctionsLauncher):
            launcher.release(tokens)
        else:
            launcher.launch(session_id, op_id)
    except Exception:
        logger.exception("turn %s of %s not woken after a decision", op_id, session_id)


@router.get("/approvals", response_model=ApprovalList)
def list_approvals(ctx: Ctx, user: User) -> ApprovalList:
    """Calls waiting for the caller's decision, across the caller's sessions."""
    found: list[PendingApproval] = []
    # A running turn with sub-agents may wait for a child's request (on Step Functions the
    # parent waits for the child's execution, not for a person), so it is looked at too.
    asks = (
        {"awaiting_approval", "running"} if ctx.runtime.deps.agent.agents else {"awaiting_approval"}
    )
    for envelope in ctx.runtime.envelopes.list_for_owner(user):
        meta = envelope.meta
        op_id = turn_run_id(meta)
        if envelope.parent_session_id is not None:
            continue  # a child's requests are listed under the turn that called it
        if turn_status(meta) not in asks or not isinstance(op_id, str):
            continue
        found.extend(_pending(ctx, envelope.session_id, op_id))
    found.sort(key=lambda p: (p.requested_at, p.session_id, p.call_id))
    return ApprovalList(approvals=found)


def _pending(ctx: ApiContext, session_id: str, op_id: str) -> list[PendingApproval]:
    items = []
    for request in pending_requests(ctx.runtime.deps, session_id, op_id):
        call = request.call
        if call.approval is None:  # awaiting_calls returns requests only
            continue
        try:
            arguments: Any = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError:
            arguments = call.arguments
        items.append(
            PendingApproval(
                session_id=session_id,
                turn_id=op_id,
                call_id=call.call_id,
                tool=call.name,
                arguments=arguments,
                requested_at=int(call.approval.requested_at * 1000),
                expires_at=int(call.approval.expires_at * 1000),
                subagent=request.subagent(),
            )
        )
    return items


__all__ = [
    "ApprovalConflictError",
    "ApprovalNotFoundError",
    "router",
    "wake",
]
