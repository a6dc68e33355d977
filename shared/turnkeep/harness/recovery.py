"""Settling what a step left behind: tool results, interrupted rounds, the terminal commit.

Rules (docs/harness.md, Recovery and idempotency):
- a tool call is settled as exactly one result entry; a call that never finished gets an
  explicit error result, so the transcript never keeps a call without a result;
- a model round that crashed mid-stream is recorded from its frames, marked interrupted;
- the terminal commit writes the result record, removes the session-scoped operation state
  and call states, and carries exactly one `retire_scope(ephemeral_scope(op))`;
- close or a fault never retires: only the terminal commit does (and `fail_turn` of a turn
  that was claimed but never started, which has nothing in its scope).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from turnkeep.agent.output import OUTPUT_INVALID
from turnkeep.harness.progress import read_frames
from turnkeep.harness.state import (
    CALL_NS,
    CallState,
    OperationState,
    TurnRecord,
    call_address,
    frames_scope,
    head_address,
    load_call,
    load_head,
    op_address,
    op_scope,
    response_id,
    result_address,
    result_entry_id,
)
from turnkeep.harness.transcript import entry_data, tool_message
from turnkeep.providers.base import AttachmentPart, Message, TextPart, ToolResultPart, Usage
from turnkeep.storage import (
    MESSAGE_ENTRY_TYPE,
    JsonValue,
    Storage,
    Write,
    delete_value,
    insert_entry,
    retire_scope,
    set_value,
)
from turnkeep.turn_rules import TerminalStatus

INTERRUPTED_MARK = "[response interrupted]"


@dataclass
class Settlement:
    """Writes that settle pending tool calls, and the branch head after them."""

    writes: list[Write]
    results: list[ToolResultPart]
    head: str | None
    """The head after these writes commit."""
    deleted_calls: set[str]
    committed_head: str | None
    """The head in storage now (the settled results are not entries yet)."""
    child_usage: Usage = field(default_factory=Usage)
    """What the settled calls' sub-agent child turns used (rolled up into the turn's)."""


def with_child_usage(state: OperationState, settlement: Settlement) -> OperationState:
    """`state` with the settled sub-agent calls' usage added to its totals and kept apart."""
    if settlement.child_usage == Usage():
        return state
    return state.model_copy(
        update={
            "usage": state.usage + settlement.child_usage,
            "subagent_usage": state.subagent_usage + settlement.child_usage,
        }
    )


def _child_usage(call: CallState) -> Usage:
    usage = (call.child or {}).get("usage")
    if not isinstance(usage, dict):
        return Usage()
    try:
        return Usage(**usage)
    except TypeError:
        return Usage()  # a shape this version does not know: nothing to roll up


def unfinished_text(call: CallState, reason: str) -> str:
    """The error result of a call that has no real outcome."""
    return f"Error: tool call {call.name} did not complete: {reason}"


def settle_pending(storage: Storage, state: OperationState, reason: str) -> Settlement:
    """Result entries for the last round's calls (unfinished ones get `reason` as an error)."""
    committed = head = load_head(storage)
    writes: list[Write] = []
    results: list[ToolResultPart] = []
    deleted: set[str] = set()
    child_usage = Usage()
    round_ = state.pending_round if state.pending_round is not None else state.round - 1
    for call_id in state.pending_call_ids:
        call = load_call(storage, state.op_id, call_id)
        if call is None:
            continue  # already settled by an earlier delivery of this step
        if call.phase == "done" and call.content is not None:
            images = tuple(
                AttachmentPart(a.attachment_id, a.name, a.media_type, a.size)
                for a in call.attachments
            )
            part = ToolResultPart(
                call_id, call.name, call.content, call.is_error, attachments=images
            )
            interrupted = call.interrupted
            child_usage += _child_usage(call)
        else:
            part = ToolResultPart(call_id, call.name, unfinished_text(call, reason), True)
            interrupted = True
        entry_id = result_entry_id(state.op_id, round_, call_id)
        writes.append(
            insert_entry(
                entry_id,
                head,
                MESSAGE_ENTRY_TYPE,
                entry_data(
                    tool_message([part]),
                    op=state.op_id,
                    round=round_,
                    call_id=call_id,
                    interrupted=interrupted,
                    replayed=call.replayed,
                    **call_timing(call),
                    **({"subagent": call.child} if call.child is not None else {}),
                ),
            )
        )
        writes.append(delete_value(call_address(state.op_id, call_id)))
        deleted.add(call_id)
        results.append(part)
        head = entry_id
    if writes:
        writes.append(set_value(head_address(), head))
    return Settlement(writes, results, head, deleted, committed, child_usage)


def call_timing(call: CallState) -> dict[str, JsonValue]:
    """What a tool result entry keeps of its call's timing (the turn's timeline): when it ran
    and, when a person was asked, when and how they decided (docs/console.md)."""
    timing: dict[str, JsonValue] = {}
    if call.started_at is not None:
        timing["timing"] = {"started_at": call.started_at, "ended_at": call.ended_at}
    approval = call.approval
    if approval is not None:
        decision = approval.decision
        timing["approval"] = {
            "requested_at": approval.requested_at,
            "decided_at": decision.decided_at if decision is not None else None,
            "decision": decision.decision if decision is not None else None,
        }
    return timing


def interrupted_message(partial: Message) -> Message:
    """The text of a partial response plus an explicit interruption mark (tool calls dropped)."""
    text = "".join(p.text for p in partial.parts if isinstance(p, TextPart))
    body = f"{text}\n{INTERRUPTED_MARK}" if text else INTERRUPTED_MARK
    return Message("assistant", (TextPart(body),))


def interrupted_response_writes(
    op_id: str, round_: int, head: str | None, partial: Message
) -> list[Write]:
    """Record round `round_`'s partial response as an interrupted entry and make it the head."""
    entry_id = response_id(op_id, round_)
    return [
        insert_entry(
            entry_id,
            head,
            MESSAGE_ENTRY_TYPE,
            entry_data(
                interrupted_message(partial),
                op=op_id,
                round=round_,
                interrupted=True,
                stop_reason=None,
                wrap_up=False,
            ),
        ),
        set_value(head_address(), entry_id),
    ]


def terminal_writes(
    storage: Storage,
    state: OperationState,
    status: TerminalStatus,
    error: str | None,
    now: float,
    *,
    unsettled_frames: bool = True,
) -> tuple[list[Write], TurnRecord]:
    """The one terminal transaction: settle, record, remove op state, retire the scope once.

    `unsettled_frames=False`: the caller knows the current round never streamed (`finish_turn`
    follows a settled round), so its frames are not looked for (on AWS: no request at all).
    """
    reason = {
        "aborted": "the turn was cancelled before it finished",
        "failed": "the turn failed before it finished",
        "completed": "the turn ended before the call ran",
    }[status]
    settled = settle_pending(storage, state, reason)
    state = with_child_usage(state, settled)
    writes = list(settled.writes)
    head = settled.head
    last_entry = state.last_entry_id if not settled.writes else head
    replay = (
        read_frames(storage, state.op_id, response_id(state.op_id, state.round))
        if unsettled_frames
        else None
    )
    if replay is not None and any(isinstance(p, TextPart) for p in replay.message.parts):
        # A round that streamed but never settled: keep what the user already saw, honestly.
        writes += interrupted_response_writes(state.op_id, state.round, head, replay.message)
        head = last_entry = response_id(state.op_id, state.round)
    # Calls not in the pending list (e.g. a wrap-up round's) are removed too.
    for stored in storage.scan_values(CALL_NS, f"{state.op_id}/"):
        call_id = stored.address.key.split("/", 1)[1]
        if call_id not in settled.deleted_calls:
            writes.append(delete_value(call_address(state.op_id, call_id)))
    record = TurnRecord(
        op_id=state.op_id,
        status=status,
        error=error,
        # A failure after the output retries ran out says so in a code (docs/agent.md).
        error_code=OUTPUT_INVALID if status == "failed" and state.output_errors else None,
        final_entry_id=last_entry,
        rounds=state.round,
        usage=state.usage,
        started_at=state.started_at,
        subagent_usage=state.subagent_usage,
        finished_at=now,
        output=state.output if status == "completed" else None,
    )
    writes.append(set_value(result_address(state.op_id), record.model_dump(mode="json")))
    writes.append(delete_value(op_address(state.op_id)))
    writes.append(retire_scope(op_scope(state.op_id)))
    if replay is not None:
        # The unsettled round's frames have their own scope (docs/harness.md, "Frames").
        writes.append(retire_scope(frames_scope(response_id(state.op_id, state.round))))
    return writes, record
