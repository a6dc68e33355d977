"""The model step: build the request from the branch, stream the reply as coalesced frames,
then settle the round (or return what an earlier delivery of it settled)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress

from turnkeep.envelope import Envelope
from turnkeep.harness.approvals import approval_pause_seconds
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.errors import FencedWriteError, StepInputError
from turnkeep.harness.io import ModelStepInput, ModelStepOutput
from turnkeep.harness.progress import FrameWriter, fenced_commit, read_frames
from turnkeep.harness.recovery import settle_pending
from turnkeep.harness.state import OperationState, load_state, op_address, response_id
from turnkeep.harness.steps.common import (
    cancelling,
    ended_output,
    fail_output,
    open_session,
    output_for_record,
)
from turnkeep.harness.steps.settlement import (
    recorded_output,
    settle_interrupted,
    settle_response,
)
from turnkeep.harness.steps.terminal import commit_terminal
from turnkeep.harness.transcript import model_view
from turnkeep.providers.base import (
    ModelError,
    ModelRequest,
    ModelResponse,
    ResponseDone,
    RetryableModelError,
    StreamEvent,
    ToolSpec,
)
from turnkeep.storage import Storage, set_value
from turnkeep.system_prompt import resolve_system_for_meta

EventListener = Callable[[StreamEvent], None]


def model_step(
    deps: HarnessDeps, inp: ModelStepInput, *, on_event: EventListener | None = None
) -> ModelStepOutput:
    """Run model round `inp.round` (or return what an earlier delivery of it settled).

    Retryable model errors propagate (the caller retries the same input; the frames of the
    failed attempt are then recorded as an interrupted response). Fatal ones return `fail`.
    `on_event` sees the stream in-process (local mode); it is not part of the step payload.
    """
    with open_session(deps, inp.session_id) as storage:
        state = load_state(storage, inp.op_id)
        if state is None:
            return ended_output(deps, storage, inp.session_id, inp.op_id, inp.round)
        if inp.round < state.round:
            return recorded_output(storage, state, inp.round, deps.limits.max_tool_calls_per_round)
        if inp.round > state.round:
            raise StepInputError(
                f"operation {inp.op_id!r} is at model round {state.round}, not {inp.round}"
            )
        envelope = deps.envelopes.get(inp.session_id)
        if cancelling(envelope, state.op_id):
            record = commit_terminal(deps, storage, state, "aborted", "cancelled by request")
            return output_for_record(inp.session_id, inp.op_id, inp.round, record)
        replay = read_frames(storage, state.op_id, response_id(state.op_id, state.round))
        if replay is not None:
            # An earlier delivery of this round streamed and then died before settling.
            settlement = settle_pending(storage, state, "the tool step did not report a result")
            if replay.response is not None:
                return settle_response(
                    deps,
                    storage,
                    state,
                    replay.response,
                    pending_writes=settlement.writes,
                    head=settlement.head,
                    wrap_up=replay.wrap_up,
                )
            return settle_interrupted(deps, storage, state, replay.message, settlement)
        if state.round >= deps.limits.max_steps:
            return fail_output(
                inp.session_id,
                inp.op_id,
                inp.round,
                f"max_steps_exceeded: the turn used its {deps.limits.max_steps} model rounds",
            )
        if state.interrupted_rounds > deps.limits.max_interrupted_rounds:
            return fail_output(
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
        try:
            state, head = _settle_tool_results(storage, state)
        except FencedWriteError:
            return ended_output(deps, storage, inp.session_id, inp.op_id, inp.round)
        registry = deps.registry(state.session_id, state.user_id)
        request = _request(
            deps,
            storage,
            envelope=envelope,
            head=head,
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
            return ended_output(deps, storage, inp.session_id, inp.op_id, inp.round)
        except ModelError as exc:
            _flush_quietly(writer)
            if exc.retryable:
                raise
            return fail_output(
                inp.session_id, inp.op_id, inp.round, f"model error ({exc.code}): {exc}"
            )
        finally:
            writer.close()
        return settle_response(
            deps, storage, state, response, pending_writes=[], head=head, wrap_up=wrap_up
        )


def _settle_tool_results(
    storage: Storage, state: OperationState
) -> tuple[OperationState, str | None]:
    """Commit the previous round's tool results as entries before this round streams.

    Events follow cause (docs/api.md): a tool's result must have a lower sequence number than
    any frame of the reply that reads it, on every orchestrator. So the results get their own
    fenced commit (with the op state no longer listing them) ahead of the stream, instead of
    riding in the round's settlement. Returns the state and the branch head after it.
    """
    paused = approval_pause_seconds(storage, state)
    settlement = settle_pending(storage, state, "the tool step did not report a result")
    if not settlement.writes:
        return state, settlement.committed_head
    settled = state.model_copy(
        update={
            "pending_call_ids": [],
            "pending_round": None,
            "last_entry_id": settlement.head,
            # Time spent waiting for a person does not count against the turn's wall clock.
            "deadline_at": state.deadline_at + paused,
        }
    )
    state_write = set_value(op_address(state.op_id), settled.model_dump(mode="json"))
    fenced_commit(storage, state.op_id, [*settlement.writes, state_write])
    return settled, settlement.head


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
    specs: tuple[ToolSpec, ...],
    wrap_up: bool,
) -> ModelRequest:
    # The envelope is read at every round, so a note written in round k folds into round k+1;
    # the fold is the one every path uses (`resolve_system` fed from the envelope meta).
    system = resolve_system_for_meta(
        envelope.meta if envelope is not None else {}, deps.default_system
    )
    messages = deps.transcripts.branch_messages(storage, head)
    return ModelRequest(
        system=system, messages=model_view(messages), tools=() if wrap_up else specs
    )
