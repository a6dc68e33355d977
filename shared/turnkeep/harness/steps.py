"""The step functions of a turn: start_turn, model_step, tool_step, finish_turn, fail_turn.

Each step is a function of (deps, small input) -> small output and resumes from storage, so a
step delivered twice with the same input has its effects once: entry ids are deterministic,
every step first reads what an earlier delivery already committed, and the operation state
says which round is next. `cancel_turn` only marks the envelope; the next step aborts.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from turnkeep.envelope import Envelope, EnvelopeConflictError
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.errors import (
    FencedWriteError,
    OperationNotFoundError,
    SessionNotFoundError,
    StepInputError,
    TurnConflictError,
)
from turnkeep.harness.io import (
    CancelResult,
    FailTurnInput,
    FinishTurnInput,
    ModelStepInput,
    ModelStepOutput,
    StartTurnInput,
    StartTurnOutput,
    ToolStepInput,
    ToolStepOutput,
    TurnResult,
)
from turnkeep.harness.progress import FrameWriter, ToolProgress, fenced_commit, read_frames
from turnkeep.harness.recovery import (
    Settlement,
    interrupted_message,
    settle_pending,
    terminal_writes,
    unfinished_text,
)
from turnkeep.harness.state import (
    STARTABLE_STATUSES,
    CallState,
    OperationState,
    TerminalStatus,
    TurnRecord,
    UsageTotals,
    call_address,
    head_address,
    load_call,
    load_head,
    load_record,
    load_state,
    op_address,
    op_scope,
    response_id,
    result_address,
    result_entry_id,
    user_entry_id,
    validate_op_id,
)
from turnkeep.harness.transcript import (
    entry_data,
    message_from_json,
    model_view,
    tool_message,
)
from turnkeep.providers.base import (
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ResponseDone,
    RetryableModelError,
    StreamEvent,
    TextPart,
    ToolResultPart,
    ToolSpec,
)
from turnkeep.storage import (
    MESSAGE_ENTRY_TYPE,
    Storage,
    UsageRow,
    Write,
    insert_entry,
    insert_usage,
    retire_scope,
    set_value,
)
from turnkeep.system_prompt import resolve_system_for_meta
from turnkeep.tools.base import ToolContext

EventListener = Callable[[StreamEvent], None]
TURN_ERROR_MAX_CHARS = 1000


@contextmanager
def _open(deps: HarnessDeps, session_id: str) -> Iterator[Storage]:
    storage = deps.open_storage(session_id)
    try:
        yield storage
    finally:
        storage.close()


def new_op_id() -> str:
    """A fresh operation id."""
    return f"op-{uuid.uuid4().hex}"


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def _clip(text: str) -> str:
    # The envelope caps turnError; cut visibly, never silently.
    if len(text) <= TURN_ERROR_MAX_CHARS:
        return text
    return text[: TURN_ERROR_MAX_CHARS - 40] + f" … [{len(text)} characters, cut]"


def _usage_json(usage: UsageTotals) -> str:
    return json.dumps(usage.model_dump(), separators=(",", ":"))


def _cancelling(envelope: Envelope | None, op_id: str) -> bool:
    if envelope is None:
        return False
    meta = envelope.meta
    return meta.get("turnStatus") == "cancelling" and meta.get("turnRunId") == op_id


# -- start ------------------------------------------------------------------------------------


def start_turn(deps: HarnessDeps, inp: StartTurnInput) -> StartTurnOutput:
    """Claim the session (one running turn), record the user message, create the op state.

    Raises TurnConflictError when another turn runs, SessionNotFoundError without an envelope.
    """
    op = validate_op_id(inp.op_id)
    envelope = deps.envelopes.get(inp.session_id)
    if envelope is None:
        raise SessionNotFoundError(f"session {inp.session_id!r} does not exist")
    with _open(deps, inp.session_id) as storage:
        if load_state(storage, op) is not None:
            return StartTurnOutput(session_id=inp.session_id, op_id=op, status="running")
        record = load_record(storage, op)
        if record is not None:
            return StartTurnOutput(session_id=inp.session_id, op_id=op, status=record.status)
        meta = envelope.meta
        if not (meta.get("turnRunId") == op and meta.get("turnStatus") == "running"):
            _claim(deps, storage, inp.session_id, op)
        now = deps.clock()
        state = OperationState(
            op_id=op,
            session_id=inp.session_id,
            user_id=inp.user_id,
            model=inp.model,
            started_at=now,
            deadline_at=now + deps.limits.wall_clock_seconds,
            user_entry_id=user_entry_id(op),
            last_entry_id=user_entry_id(op),
        )
        message = Message("user", (TextPart(inp.text),))
        try:
            result = storage.commit(
                [
                    insert_entry(
                        state.user_entry_id,
                        load_head(storage),
                        MESSAGE_ENTRY_TYPE,
                        entry_data(message, op=op, round=-1),
                    ),
                    set_value(head_address(), state.user_entry_id),
                    set_value(op_address(op), state.model_dump(mode="json")),
                ]
            )
        except Exception as exc:
            deps.envelopes.update_worker_meta(
                inp.session_id,
                {"turnStatus": "failed", "turnError": _clip(f"could not start: {exc}")},
                expect={"turnRunId": [op]},
            )
            raise
        deps.envelopes.update_worker_meta(
            inp.session_id, {"turnStreamCursor": result.seqs[-1]}, expect={"turnRunId": [op]}
        )
    return StartTurnOutput(session_id=inp.session_id, op_id=op, status="running")


def _claim(deps: HarnessDeps, storage: Storage, session_id: str, op: str) -> None:
    patch: dict[str, Any] = {
        "turnStatus": "running",
        "turnRunId": op,
        "turnStartedAt": _ms(deps.clock()),
        "turnFinishedAt": None,
        "turnError": None,
        "turnStreamCursor": None,
        "turnStepCount": 0,
        "usage": None,
    }
    for attempt in range(2):
        try:
            deps.envelopes.update_worker_meta(
                session_id, patch, expect={"turnStatus": STARTABLE_STATUSES}
            )
            return
        except EnvelopeConflictError:
            current = deps.envelopes.get(session_id)
            meta = current.meta if current is not None else {}
            running = meta.get("turnRunId")
            # A turn whose terminal commit landed but whose envelope update was lost is over:
            # repair the envelope from storage once, then claim again.
            if attempt == 0 and isinstance(running, str) and load_state(storage, running) is None:
                record = load_record(storage, running)
                if record is not None:
                    _envelope_terminal(deps, session_id, record, None)
                    continue
            raise TurnConflictError(
                session_id,
                running if isinstance(running, str) else None,
                str(meta.get("turnStatus")),
            ) from None


# -- model round --------------------------------------------------------------------------------


def model_step(
    deps: HarnessDeps, inp: ModelStepInput, *, on_event: EventListener | None = None
) -> ModelStepOutput:
    """Run model round `inp.round` (or return what an earlier delivery of it settled).

    Retryable model errors propagate (the caller retries the same input; the frames of the
    failed attempt are then recorded as an interrupted response). Fatal ones return `fail`.
    `on_event` sees the stream in-process (local mode); it is not part of the step payload.
    """
    with _open(deps, inp.session_id) as storage:
        state = load_state(storage, inp.op_id)
        if state is None:
            return _ended_output(storage, inp.session_id, inp.op_id, inp.round)
        if inp.round < state.round:
            return _recorded_output(storage, state, inp.round, deps.limits.max_tool_calls_per_round)
        if inp.round > state.round:
            raise StepInputError(
                f"operation {inp.op_id!r} is at model round {state.round}, not {inp.round}"
            )
        envelope = deps.envelopes.get(inp.session_id)
        if _cancelling(envelope, state.op_id):
            record = _terminal(deps, storage, state, "aborted", "cancelled by request")
            return _output_for_record(inp.session_id, inp.op_id, inp.round, record)
        replay = read_frames(storage, state.op_id, response_id(state.op_id, state.round))
        if replay is not None:
            # An earlier delivery of this round streamed and then died before settling.
            settlement = settle_pending(storage, state, "the tool step did not report a result")
            if replay.response is not None:
                return _settle_response(
                    deps,
                    storage,
                    state,
                    replay.response,
                    pending_writes=settlement.writes,
                    head=settlement.head,
                    wrap_up=replay.wrap_up,
                )
            return _settle_interrupted(deps, storage, state, replay.message, settlement)
        if state.round >= deps.limits.max_steps:
            return _fail_output(
                inp.session_id,
                inp.op_id,
                inp.round,
                f"max_steps_exceeded: the turn used its {deps.limits.max_steps} model rounds",
            )
        if state.interrupted_rounds > deps.limits.max_interrupted_rounds:
            return _fail_output(
                inp.session_id,
                inp.op_id,
                inp.round,
                f"model_interrupted: {state.interrupted_rounds} consecutive model rounds were "
                "interrupted mid-stream",
            )
        wrap_up = False
        if deps.clock() >= state.deadline_at:
            if state.wrap_up_done:
                return ModelStepOutput(
                    session_id=inp.session_id,
                    op_id=inp.op_id,
                    round=inp.round,
                    next="finish",
                    next_round=inp.round,
                    wrap_up=True,
                )
            wrap_up = True  # one tools-off round so the model can answer with what it has
        settlement = settle_pending(storage, state, "the tool step did not report a result")
        registry = deps.registry(state.session_id, state.user_id)
        request = _request(
            deps,
            storage,
            envelope=envelope,
            head=settlement.committed_head,
            pending=settlement.results,
            specs=registry.specs(),
            wrap_up=wrap_up,
        )
        writer = FrameWriter(
            storage,
            state.op_id,
            response_id(state.op_id, state.round),
            deps.clock,
            interval_s=deps.limits.frame_interval_ms / 1000,
            max_bytes=deps.limits.frame_max_bytes,
        )
        try:
            response = _stream(
                deps, state, request=request, writer=writer, on_event=on_event, wrap_up=wrap_up
            )
        except FencedWriteError:
            return _ended_output(storage, inp.session_id, inp.op_id, inp.round)
        except ModelError as exc:
            _flush_quietly(writer)
            if exc.retryable:
                raise
            return _fail_output(
                inp.session_id, inp.op_id, inp.round, f"model error ({exc.code}): {exc}"
            )
        finally:
            writer.close()
        return _settle_response(
            deps,
            storage,
            state,
            response,
            pending_writes=settlement.writes,
            head=settlement.head,
            wrap_up=wrap_up,
        )


def _stream(
    deps: HarnessDeps,
    state: OperationState,
    *,
    request: ModelRequest,
    writer: FrameWriter,
    on_event: EventListener | None,
    wrap_up: bool,
) -> ModelResponse:
    provider = deps.provider_for(state.model)
    for event in provider.stream(request):
        if isinstance(event, ResponseDone):
            writer.finish(event.response, wrap_up=wrap_up)
            if on_event is not None:
                on_event(event)
            return event.response
        writer.add(event)
        if on_event is not None:
            on_event(event)
    raise RetryableModelError(
        f"{provider.name}: stream ended without a final response", code="stream_truncated"
    )


def _flush_quietly(writer: FrameWriter) -> None:
    # Keep what streamed before a model error so recovery can record it; a fenced writer has
    # nothing to keep.
    with suppress(FencedWriteError):
        writer.flush()


def _request(
    deps: HarnessDeps,
    storage: Storage,
    *,
    envelope: Envelope | None,
    head: str | None,
    pending: list[ToolResultPart],
    specs: tuple[ToolSpec, ...],
    wrap_up: bool,
) -> ModelRequest:
    # The envelope is read at every round, so a note written in round k folds into round k+1;
    # the fold is the one every path uses (`resolve_system` fed from the envelope meta).
    system = resolve_system_for_meta(
        envelope.meta if envelope is not None else {}, deps.default_system
    )
    messages = deps.transcripts.branch_messages(storage, head)
    if pending:
        messages.append(tool_message(pending))
    return ModelRequest(
        system=system, messages=model_view(messages), tools=() if wrap_up else specs
    )


def _commit_round(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    new_state: OperationState,
    writes: list[Write],
) -> ModelStepOutput | None:
    """Commit a settled round with the new op state, fenced; the `done` output if the turn
    ended meanwhile (the round is then not recorded), else None."""
    op = state.op_id
    writes.append(set_value(op_address(op), new_state.model_dump(mode="json")))
    try:
        result = fenced_commit(storage, op, writes)
    except FencedWriteError:
        return _ended_output(storage, state.session_id, op, state.round)
    _envelope_progress(deps, state.session_id, op, result.seqs[-1], new_state)
    return None


def _settle_response(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    response: ModelResponse,
    *,
    pending_writes: list[Write],
    head: str | None,
    wrap_up: bool = False,
) -> ModelStepOutput:
    """One session transaction: pending tool results, the response entry, usage, op state."""
    op = state.op_id
    entry_id = response_id(op, state.round)
    calls = response.message.tool_calls
    call_ids = [c.id for c in calls]
    if len(set(call_ids)) != len(call_ids):
        repeated = sorted(c for c, n in Counter(call_ids).items() if n > 1)
        return _fail_output(
            state.session_id, op, state.round, f"model error: duplicate tool call ids {repeated}"
        )
    usage = response.usage
    totals = UsageTotals(
        input_tokens=state.usage.input_tokens + usage.input_tokens,
        output_tokens=state.usage.output_tokens + usage.output_tokens,
        cache_read_tokens=state.usage.cache_read_tokens + usage.cache_read_tokens,
        cache_write_tokens=state.usage.cache_write_tokens + usage.cache_write_tokens,
    )
    writes = list(pending_writes)
    writes.append(
        insert_entry(
            entry_id,
            head,
            MESSAGE_ENTRY_TYPE,
            entry_data(
                response.message,
                op=op,
                round=state.round,
                interrupted=False,
                stop_reason=response.stop_reason,
                wrap_up=wrap_up,
                model=response.model,
            ),
        )
    )
    writes.append(set_value(head_address(), entry_id))
    writes.append(
        insert_usage(
            UsageRow(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                model=response.model or None,
            )
        )
    )
    limit = deps.limits.max_tool_calls_per_round
    for index, call in enumerate(calls):
        call_state = CallState(
            call_id=call.id, name=call.name, arguments=call.arguments, round=state.round
        )
        if index >= limit and not wrap_up:
            # Answered now, never run: the step output lists at most `limit` call ids.
            call_state = call_state.model_copy(
                update={
                    "phase": "done",
                    "is_error": True,
                    "content": f"Error: tool call not run: the model made {len(calls)} tool "
                    f"calls in one round and the limit is {limit}. Make fewer calls at a time.",
                }
            )
        writes.append(set_value(call_address(op, call.id), call_state.model_dump(mode="json")))
    new_state = state.model_copy(
        update={
            "round": state.round + 1,
            "pending_call_ids": call_ids,
            "pending_round": state.round,
            "wrap_up_done": state.wrap_up_done or wrap_up,
            "interrupted_rounds": 0,
            "usage": totals,
            "last_entry_id": entry_id,
        }
    )
    ended = _commit_round(deps, storage, state, new_state, writes)
    if ended is not None:
        return ended
    return ModelStepOutput(
        session_id=state.session_id,
        op_id=op,
        round=state.round,
        next="tools" if call_ids and not wrap_up else "finish",
        next_round=state.round + 1,
        call_ids=call_ids[:limit] if not wrap_up else [],
        wrap_up=wrap_up,
    )


def _settle_interrupted(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    partial: Message,
    settlement: Settlement,
) -> ModelStepOutput:
    op = state.op_id
    entry_id = response_id(op, state.round)
    writes = list(settlement.writes)
    writes.append(
        insert_entry(
            entry_id,
            settlement.head,
            MESSAGE_ENTRY_TYPE,
            entry_data(
                interrupted_message(partial),
                op=op,
                round=state.round,
                interrupted=True,
                stop_reason=None,
                wrap_up=False,
            ),
        )
    )
    writes.append(set_value(head_address(), entry_id))
    new_state = state.model_copy(
        update={
            "round": state.round + 1,
            "pending_call_ids": [],
            "pending_round": None,
            "interrupted_rounds": state.interrupted_rounds + 1,
            "last_entry_id": entry_id,
        }
    )
    ended = _commit_round(deps, storage, state, new_state, writes)
    if ended is not None:
        return ended
    return ModelStepOutput(
        session_id=state.session_id,
        op_id=op,
        round=state.round,
        next="model",
        next_round=state.round + 1,
        interrupted=True,
    )


def _recorded_output(
    storage: Storage, state: OperationState, round_: int, call_limit: int
) -> ModelStepOutput:
    found = storage.get_entries([response_id(state.op_id, round_)])
    if not found or not isinstance(found[0].data, dict):
        raise StepInputError(f"operation {state.op_id!r} has no settled model round {round_}")
    data = found[0].data
    call_ids = [c.id for c in message_from_json(data.get("message")).tool_calls]
    interrupted = bool(data.get("interrupted"))
    wrap_up = bool(data.get("wrap_up"))
    if interrupted:
        next_action = "model"
    elif call_ids and not wrap_up:
        next_action = "tools"
    else:
        next_action = "finish"
    return ModelStepOutput(
        session_id=state.session_id,
        op_id=state.op_id,
        round=round_,
        next=next_action,  # type: ignore[arg-type]
        next_round=round_ + 1,
        call_ids=call_ids[:call_limit] if next_action == "tools" else [],
        interrupted=interrupted,
        wrap_up=wrap_up,
    )


def _ended_output(storage: Storage, session_id: str, op_id: str, round_: int) -> ModelStepOutput:
    record = load_record(storage, op_id)
    if record is None:
        raise OperationNotFoundError(f"session {session_id!r} has no operation {op_id!r}")
    return _output_for_record(session_id, op_id, round_, record)


def _output_for_record(
    session_id: str, op_id: str, round_: int, record: TurnRecord
) -> ModelStepOutput:
    return ModelStepOutput(
        session_id=session_id,
        op_id=op_id,
        round=round_,
        next="done",
        next_round=round_,
        status=record.status,
        error=record.error,
    )


def _fail_output(session_id: str, op_id: str, round_: int, error: str) -> ModelStepOutput:
    return ModelStepOutput(
        session_id=session_id,
        op_id=op_id,
        round=round_,
        next="fail",
        next_round=round_,
        error=_clip(error),
    )


# -- tool call ----------------------------------------------------------------------------------


def tool_step(deps: HarnessDeps, inp: ToolStepInput) -> ToolStepOutput:
    """Run one tool call of the current round, at most once unless it is replay-safe.

    A call found `started` (an earlier delivery died mid-call: outcome unknown) is re-run only
    if its tool declares `replay_safe`; otherwise it is recorded as an interrupted error result.
    """
    with _open(deps, inp.session_id) as storage:
        state = load_state(storage, inp.op_id)
        if state is None:
            if load_record(storage, inp.op_id) is None:
                raise OperationNotFoundError(
                    f"session {inp.session_id!r} has no operation {inp.op_id!r}"
                )
            return _tool_output(inp, "skipped")
        call = load_call(storage, state.op_id, inp.call_id)
        if call is None:
            settled = storage.get_entries(
                [result_entry_id(state.op_id, r, inp.call_id) for r in range(state.round)]
            )
            if settled:
                return _settled_tool_output(inp, settled[-1].data)
            raise StepInputError(f"operation {inp.op_id!r} has no tool call {inp.call_id!r}")
        if call.phase == "done":
            return _tool_output(inp, "done", call)
        if _cancelling(deps.envelopes.get(inp.session_id), state.op_id):
            return _tool_output(inp, "skipped")  # the next model step aborts the turn
        registry = deps.registry(state.session_id, state.user_id)
        replayed = False
        if call.phase == "started":
            if not registry.is_replay_safe(call.name):
                done = call.model_copy(
                    update={
                        "phase": "done",
                        "is_error": True,
                        "interrupted": True,
                        "content": unfinished_text(
                            call,
                            "its outcome is unknown (the step was interrupted) and the tool is "
                            "not replay-safe, so it was not run again; check its effects "
                            "before calling it again",
                        ),
                    }
                )
                if not _fenced_session_commit(storage, state.op_id, call, done):
                    return _tool_output(inp, "skipped")
                return _tool_output(inp, "done", done)
            replayed = True
        started = call.model_copy(
            update={"phase": "started", "attempts": call.attempts + 1, "replayed": replayed}
        )
        if not _fenced_session_commit(storage, state.op_id, call, started):
            return _tool_output(inp, "skipped")
        ctx_progress = ToolProgress(storage, state.op_id, call.call_id)
        ctx = ToolContext(
            session_id=state.session_id,
            user_id=state.user_id,
            operation_id=state.op_id,
            call_id=call.call_id,
            extras={"progress": ctx_progress, "replayed": replayed},
        )
        result = registry.run_call(call.name, call.arguments, ctx)
        content = _cap_result(result.content, deps.limits.max_tool_result_bytes)
        done = started.model_copy(
            update={"phase": "done", "content": content, "is_error": result.is_error}
        )
        if not _fenced_session_commit(storage, state.op_id, started, done):
            return _tool_output(inp, "skipped")
        return _tool_output(inp, "done", done)


def _settled_tool_output(inp: ToolStepInput, data: Any) -> ToolStepOutput:
    # A redelivery after the call became a result entry reports what the first delivery did.
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


def _cap_result(content: str, max_bytes: int) -> str:
    raw = content.encode("utf-8")
    if len(raw) <= max_bytes:
        return content
    kept = raw[: max_bytes - 64].decode("utf-8", errors="ignore")
    return f"{kept}\n[tool result cut: {len(raw)} bytes, the limit is {max_bytes}]"


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


def _tool_output(inp: ToolStepInput, status: str, call: CallState | None = None) -> ToolStepOutput:
    return ToolStepOutput(
        session_id=inp.session_id,
        op_id=inp.op_id,
        call_id=inp.call_id,
        status=status,  # type: ignore[arg-type]
        is_error=call.is_error if call is not None else False,
        replayed=call.replayed if call is not None else False,
        interrupted=call.interrupted if call is not None else False,
    )


# -- terminal -----------------------------------------------------------------------------------


def finish_turn(deps: HarnessDeps, inp: FinishTurnInput) -> TurnResult:
    """End the turn as completed (aborted if a cancel arrived); idempotent."""
    with _open(deps, inp.session_id) as storage:
        state = load_state(storage, inp.op_id)
        if state is None:
            return _repeat_terminal(deps, storage, inp.session_id, inp.op_id)
        envelope = deps.envelopes.get(inp.session_id)
        if _cancelling(envelope, state.op_id):
            record = _terminal(deps, storage, state, "aborted", "cancelled by request")
        else:
            record = _terminal(deps, storage, state, "completed", None)
        return _result(inp.session_id, record)


def fail_turn(deps: HarnessDeps, inp: FailTurnInput) -> TurnResult:
    """End the turn as failed with `error` (the Catch target); idempotent."""
    with _open(deps, inp.session_id) as storage:
        state = load_state(storage, inp.op_id)
        if state is None:
            if load_record(storage, inp.op_id) is None and _claimed(deps, inp):
                return _result(inp.session_id, _fail_unstarted(deps, storage, inp))
            return _repeat_terminal(deps, storage, inp.session_id, inp.op_id)
        record = _terminal(deps, storage, state, "failed", _clip(inp.error))
        return _result(inp.session_id, record)


def _claimed(deps: HarnessDeps, inp: FailTurnInput) -> bool:
    envelope = deps.envelopes.get(inp.session_id)
    meta = envelope.meta if envelope is not None else {}
    return meta.get("turnRunId") == inp.op_id and meta.get("turnStatus") not in STARTABLE_STATUSES


def _fail_unstarted(deps: HarnessDeps, storage: Storage, inp: FailTurnInput) -> TurnRecord:
    # start_turn claimed the session and died before its first commit: nothing of the turn is
    # stored. Record the failure so the session can take a new turn (and a late redelivery of
    # start_turn finds the record instead of starting).
    record = TurnRecord(
        op_id=inp.op_id, status="failed", error=_clip(inp.error), finished_at=deps.clock()
    )
    result = storage.commit(
        [
            set_value(result_address(inp.op_id), record.model_dump(mode="json")),
            retire_scope(op_scope(inp.op_id)),
        ]
    )
    _envelope_terminal(deps, inp.session_id, record, result.seqs[-1])
    return record


def abort_turn(deps: HarnessDeps, session_id: str, op_id: str) -> TurnResult:
    """End the turn as aborted now (what a step does when it observes a cancel)."""
    with _open(deps, session_id) as storage:
        state = load_state(storage, op_id)
        if state is None:
            return _repeat_terminal(deps, storage, session_id, op_id)
        return _result(session_id, _terminal(deps, storage, state, "aborted", "cancelled"))


def cancel_turn(deps: HarnessDeps, session_id: str, op_id: str | None = None) -> CancelResult:
    """Ask the running turn to stop: status `cancelling`; its next step aborts it."""
    envelope = deps.envelopes.get(session_id)
    if envelope is None:
        raise SessionNotFoundError(f"session {session_id!r} does not exist")
    running = envelope.meta.get("turnRunId")
    target = op_id if op_id is not None else running
    if not isinstance(target, str):
        raise OperationNotFoundError(f"session {session_id!r} has no turn to cancel")
    try:
        deps.envelopes.update_worker_meta(
            session_id,
            {"turnStatus": "cancelling"},
            expect={"turnStatus": ["running"], "turnRunId": [target]},
        )
        status = "cancelling"
    except EnvelopeConflictError:
        current = deps.envelopes.get(session_id)
        meta = current.meta if current is not None else {}
        if meta.get("turnRunId") != target:
            raise OperationNotFoundError(
                f"operation {target!r} is not the current turn of session {session_id!r}"
            ) from None
        status = str(meta.get("turnStatus"))
    return CancelResult(session_id=session_id, op_id=target, status=status)


def _terminal(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    status: TerminalStatus,
    error: str | None,
) -> TurnRecord:
    writes, record = terminal_writes(storage, state, status, error, deps.clock())
    try:
        result = fenced_commit(storage, state.op_id, writes)
    except FencedWriteError:
        # Another step's terminal commit landed first: its record is the outcome.
        winner = load_record(storage, state.op_id)
        if winner is None:
            raise OperationNotFoundError(
                f"session {state.session_id!r} has no operation {state.op_id!r}"
            ) from None
        _envelope_terminal(deps, state.session_id, winner, None)
        return winner
    _envelope_terminal(deps, state.session_id, record, result.seqs[-1])
    return record


def _repeat_terminal(
    deps: HarnessDeps, storage: Storage, session_id: str, op_id: str
) -> TurnResult:
    record = load_record(storage, op_id)
    if record is None:
        raise OperationNotFoundError(f"session {session_id!r} has no operation {op_id!r}")
    envelope = deps.envelopes.get(session_id)
    if (
        envelope is not None
        and envelope.meta.get("turnRunId") == op_id
        and envelope.meta.get("turnStatus") != record.status
    ):
        _envelope_terminal(deps, session_id, record, None)  # finish a lost envelope update
    return _result(session_id, record)


def _envelope_terminal(
    deps: HarnessDeps, session_id: str, record: TurnRecord, cursor: int | None
) -> None:
    patch: dict[str, Any] = {
        "turnStatus": record.status,
        "turnError": record.error,
        "turnFinishedAt": _ms(record.finished_at),
        "usage": _usage_json(record.usage),
        "turnStepCount": record.rounds,
    }
    if cursor is not None:
        patch["turnStreamCursor"] = cursor
    # A later turn may own the envelope now; storage holds this turn's record either way.
    with suppress(EnvelopeConflictError):
        deps.envelopes.update_worker_meta(session_id, patch, expect={"turnRunId": [record.op_id]})


def _envelope_progress(
    deps: HarnessDeps, session_id: str, op_id: str, cursor: int, state: OperationState
) -> None:
    # If the envelope moved on (a later turn), the storage commit is the truth.
    with suppress(EnvelopeConflictError):
        deps.envelopes.update_worker_meta(
            session_id,
            {
                "turnStreamCursor": cursor,
                "usage": _usage_json(state.usage),
                "turnStepCount": state.round,
            },
            expect={"turnRunId": [op_id]},
        )


def _result(session_id: str, record: TurnRecord) -> TurnResult:
    return TurnResult(
        session_id=session_id,
        op_id=record.op_id,
        status=record.status,
        error=record.error,
        final_entry_id=record.final_entry_id,
        rounds=record.rounds,
        usage=record.usage,
    )


def turn_result(deps: HarnessDeps, session_id: str, op_id: str) -> TurnResult | None:
    """The terminal result of `op_id`, or None while it runs."""
    with _open(deps, session_id) as storage:
        record = load_record(storage, op_id)
        return None if record is None else _result(session_id, record)
