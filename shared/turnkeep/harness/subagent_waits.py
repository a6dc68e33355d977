"""On Step Functions, a parent turn waits for a sub-agent call's child turn at zero compute: the
state machine's `RunChildTurn` wait (`lambda:invoke.waitForTaskToken` on the tool step function)
keeps its task token in the parent's operation scope and starts the child's own execution; the
child's last step hands the token back (`SendTaskSuccess`), and the parent's tool step then
records the child's result (docs/step-functions.md, "Sub-agents")."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final

from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.errors import FencedWriteError
from turnkeep.harness.progress import fenced_commit
from turnkeep.harness.state import OperationState, load_call, load_state, op_scope
from turnkeep.harness.subagents import (
    ChildTurn,
    child_ids,
    child_record,
    load_link,
    subagent_named,
)
from turnkeep.storage import Storage, Value, set_value, value

TOKEN_NS: Final = "subagent.token"
"""`value(TOKEN_NS, call_id)` in the parent's operation scope: the wait's task token."""

StartExecution = Callable[[str, str], bool]
"""(execution name, input JSON) -> started; False: an execution of that name exists already."""


def child_token_address(op_id: str, call_id: str) -> Value:
    """Where the parent's wait for call `call_id`'s child turn keeps its task token."""
    return value(TOKEN_NS, call_id, op_scope(op_id))


def hold_child(
    deps: HarnessDeps,
    session_id: str,
    op_id: str,
    call_id: str,
    token: str,
    *,
    start_execution: StartExecution,
    release: Callable[[str], None],
) -> str:
    """Keep the wait's token, then start the child turn's execution (`waiting`); or release
    the wait at once (`released`) when there is nothing to wait for: the parent ended, the call
    is settled, or the child already ended (a redelivered wait)."""
    storage = deps.open_storage(session_id)
    try:
        state = load_state(storage, op_id)
        call = load_call(storage, op_id, call_id) if state is not None else None
        if call is None or call.phase == "done" or subagent_named(deps.agent, call.name) is None:
            release(token)
            return "released"
        try:
            # Kept before the child can start, so its end always finds the token.
            fenced_commit(storage, op_id, [set_value(child_token_address(op_id, call_id), token)])
        except FencedWriteError:
            release(token)
            return "released"
    finally:
        storage.close()
    child_session, child_op = child_ids(session_id, op_id, call_id)
    link = ChildTurn(
        agent=call.name,
        session_id=child_session,
        op_id=child_op,
        parent_session_id=session_id,
        parent_op_id=op_id,
        call_id=call_id,
    )
    if child_record(deps, link) is None:
        payload = json.dumps({"session_id": child_session, "op_id": child_op, "round": 0})
        if start_execution(child_op, payload) or child_record(deps, link) is None:
            return "waiting"  # started now, or already running (its end releases the token)
    release(token)
    return "released"


def notify_parent(deps: HarnessDeps, session_id: str, release: Callable[[str], None]) -> bool:
    """After a turn of `session_id` ended: if it is a sub-agent's child turn, hand its parent's
    wait the token back (True). Other sessions cost no request."""
    link = load_link(deps, session_id)
    if link is None:
        return False
    parent = deps.open_storage(link.parent_session_id)
    try:
        token = parent.get_value(child_token_address(link.parent_op_id, link.call_id))
    finally:
        parent.close()
    if token is None or not isinstance(token.value, str):
        return False  # the parent ended, or its wait did not start yet (it checks the child)
    release(token.value)
    return True


def child_tokens_of(storage: Storage, state: OperationState) -> list[str]:
    """The task tokens of the round's waits for child turns (to release them on a cancel)."""
    tokens: list[str] = []
    for call_id in state.pending_call_ids:
        stored = storage.get_value(child_token_address(state.op_id, call_id))
        if stored is not None and isinstance(stored.value, str):
            tokens.append(stored.value)
    return tokens
