"""The model step: build the request from the branch, stream the reply as coalesced frames,
then settle the round (or return what an earlier delivery of it settled)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from turnkeep.agent.output import FINAL_RESULT_TOOL
from turnkeep.envelope import Envelope
from turnkeep.harness.approvals import approval_pause_seconds
from turnkeep.harness.attachment_context import S3Sources, with_attachment_bytes
from turnkeep.harness.context import (
    ContextBudgetError,
    NothingToShrinkError,
    PreparedRound,
    prepare_round,
)
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.envelope_io import read_ahead
from turnkeep.harness.errors import FencedWriteError, StepInputError
from turnkeep.harness.io import ModelStepInput, ModelStepOutput
from turnkeep.harness.live import LiveText, may_watch
from turnkeep.harness.progress import FrameWriter, read_frames
from turnkeep.harness.recovery import settle_pending, with_child_usage
from turnkeep.harness.source_notices import (
    ToolSourceNotice,
    required_source_failure,
    round_notices,
)
from turnkeep.harness.spans import compaction_span_of, round_span
from turnkeep.harness.spend_gate import charge_round, check_before_round, worst_case
from turnkeep.harness.state import (
    OperationState,
    call_address,
    frames_scope,
    head_address,
    load_state,
    op_address,
    op_scope,
    response_id,
    result_address,
)
from turnkeep.harness.steps.common import cancelling, open_session, turn_model_settings
from turnkeep.harness.steps.model_outputs import ended_output, fail_output, output_for_record
from turnkeep.harness.steps.settlement import (
    recorded_output,
    settle_interrupted,
    settle_response,
)
from turnkeep.harness.steps.terminal import commit_terminal
from turnkeep.harness.transcript import context_start_address
from turnkeep.harness.typed_output import final_result_spec, must_end, turn_output
from turnkeep.providers.base import (
    FatalModelError,
    ModelError,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ResponseDone,
    RetryableModelError,
    StreamEvent,
    TextDelta,
    ToolResultPart,
    ToolSpec,
)
from turnkeep.providers.settings import ModelSettings
from turnkeep.storage import JsonValue, Storage, Write, set_value
from turnkeep.system_prompt import resolve_system_for_meta
from turnkeep.telemetry import genai

EventListener = Callable[[StreamEvent | ToolSourceNotice], None]
"""Sees an in-process round: the provider's stream, and a notice for each optional tool source
the round goes on without."""


def model_step(
    deps: HarnessDeps, inp: ModelStepInput, *, on_event: EventListener | None = None
) -> ModelStepOutput:
    """Run model round `inp.round` (or return what an earlier delivery of it settled).

    Retryable model errors propagate (the caller retries the same input; the frames of the
    failed attempt are then recorded as an interrupted response). Fatal ones return `fail`.
    `on_event` sees the stream in-process (local mode); it is not part of the step payload.
    The phases, in order: begin (load and guard), prepare the request, call the provider and
    stream, settle (which decides the next step).
    """
    with open_session(deps, inp.session_id) as storage:
        begun = _begin_round(deps, storage, inp)
        if isinstance(begun, ModelStepOutput):
            return begun
        prepared = _prepare_round(deps, storage, begun, on_event)
        if isinstance(prepared, ModelStepOutput):
            return prepared
        over = _over_budget(deps, storage, prepared)
        if over is not None:
            return _fail(prepared.state, over)
        started = deps.clock()
        with round_span(prepared.state, prepared.provider, prepared.request.request) as span:
            streamed = _call_provider(deps, storage, prepared, on_event)
            if isinstance(streamed, ModelStepOutput):
                if streamed.next == "fail":
                    span.fail("model_error", streamed.error)
                return streamed
            genai.chat_done(span, streamed.response)
        timing: dict[str, JsonValue] = {"started_at": started, "ended_at": deps.clock()}
        return _settle_streamed(deps, storage, prepared, streamed, timing)


# --- Phase 1: begin (load the round, return what is already decided, guard the limits) ---


@dataclass(frozen=True, slots=True)
class _Begun:
    """A round that is to run now: its state, the envelope read with it, and its mode."""

    state: OperationState
    envelope: Envelope | None
    wrap_up: bool
    """A tools-off round so the model can answer with what it has (the deadline passed)."""


def _begin_round(
    deps: HarnessDeps, storage: Storage, inp: ModelStepInput
) -> ModelStepOutput | _Begun:
    """Load round `inp.round`: the output already decided (ended, settled, cancelled, resumed
    from an earlier delivery's frames, over a limit), or the round to run."""
    # One read for everything a round starts from (docs/aws-storage.md).
    envelope = read_ahead(
        deps,
        storage,
        values=[
            op_address(inp.op_id),
            result_address(inp.op_id),
            head_address(),
            context_start_address(),
        ],
        # The round's frames scope too: a redelivery finds its frames (or the head proves
        # there are none) in the same request.
        scopes=[op_scope(inp.op_id), frames_scope(response_id(inp.op_id, inp.round))],
        head=True,
    )
    state = load_state(storage, inp.op_id)
    if state is None:
        return ended_output(deps, storage, inp.session_id, inp.op_id, inp.round)
    if inp.round < state.round:
        return recorded_output(storage, state, inp.round, deps.limits.max_tool_calls_per_round)
    if inp.round > state.round:
        raise StepInputError(
            f"operation {inp.op_id!r} is at model round {state.round}, not {inp.round}"
        )
    if state.pending_call_ids:
        storage.prefetch([call_address(state.op_id, c) for c in state.pending_call_ids])
    if cancelling(envelope, state.op_id):
        record = commit_terminal(deps, storage, state, "aborted", "cancelled by request")
        return output_for_record(inp.session_id, inp.op_id, inp.round, record)
    resumed = _resume_delivered(deps, storage, state)
    if resumed is not None:
        return resumed
    return _guard_limits(deps, state, envelope)


def _resume_delivered(
    deps: HarnessDeps, storage: Storage, state: OperationState
) -> ModelStepOutput | None:
    """Settle what an earlier delivery of this round streamed before it died (None: nothing)."""
    replay = read_frames(storage, state.op_id, response_id(state.op_id, state.round))
    if replay is None:
        return None
    settlement = settle_pending(storage, state, "the tool step did not report a result")
    state = with_child_usage(state, settlement)
    if replay.response is not None:
        return settle_response(
            deps,
            storage,
            state,
            replay.response,
            pending_writes=settlement.writes,
            head=settlement.head,
            wrap_up=replay.wrap_up,
            frames_written=True,
        )
    return settle_interrupted(deps, storage, state, replay.message, settlement)


def _guard_limits(
    deps: HarnessDeps, state: OperationState, envelope: Envelope | None
) -> ModelStepOutput | _Begun:
    """The `fail` or `finish` output of a turn over its step, interruption or time limits;
    else the round to run (a wrap-up round once the deadline passed)."""
    limits = deps.limits
    if state.round >= limits.max_steps:
        return _fail(
            state, f"max_steps_exceeded: the turn used its {limits.max_steps} model rounds"
        )
    if state.interrupted_rounds > limits.max_interrupted_rounds:
        return _fail(
            state,
            f"model_interrupted: {state.interrupted_rounds} consecutive model rounds were "
            "interrupted mid-stream",
        )
    if deps.clock() < state.deadline_at:
        return _Begun(state, envelope, wrap_up=False)
    if state.wrap_up_done:
        return ModelStepOutput(
            session_id=state.session_id,
            op_id=state.op_id,
            round=state.round,
            next="finish",
            next_round=state.round,
            wrap_up=True,
        )
    return _Begun(state, envelope, wrap_up=True)


def _fail(state: OperationState, error: str) -> ModelStepOutput:
    return fail_output(state.session_id, state.op_id, state.round, error)


# --- Phase 2: prepare the round's request ---


@dataclass(slots=True)
class _Prepared:
    """A round ready to stream: its request and the writes that go ahead of its frames."""

    state: OperationState
    """After the previous round's tool results (settled in memory)."""
    provider: ModelProvider
    shape: _RoundShape
    request: PreparedRound
    """Replaced once when the provider rejects it as too long."""
    prelude: list[Write]
    wrap_up: bool


def _prepare_round(
    deps: HarnessDeps, storage: Storage, begun: _Begun, on_event: EventListener | None
) -> ModelStepOutput | _Prepared:
    """The round's request within budget, with the previous round's tool results and the
    tool-source notices as its prelude; `fail` when a required source or the budget fails."""
    state, wrap_up = begun.state, begun.wrap_up
    registry = deps.registry(state.session_id, state.user_id)
    # Nothing is committed yet: a retry of this round starts from the same place.
    blocked = None if wrap_up else required_source_failure(registry)
    if blocked is not None:
        return _fail(state, blocked)
    state, results = _settle_tool_results(storage, state)
    notice_writes = round_notices(storage, registry, state, results.head, on_event)
    provider = deps.provider_for(state.model)
    tools: tuple[ToolSpec, ...] = () if wrap_up else tuple(registry.specs())
    forced: str | None = None
    output = turn_output(deps, state)
    if output is not None:
        # A typed turn offers final_result even in the wrap-up round (docs/agent.md).
        tools = (*tools, final_result_spec(output))
        forced = FINAL_RESULT_TOOL if must_end(deps, state, wrap_up=wrap_up) else None
    shape = _RoundShape(
        deps,
        storage,
        state,
        provider,
        envelope=begun.envelope,
        results=results,
        tools=tools,
        forced_tool=forced,
    )
    try:
        request = shape.prepare()
    except (ContextBudgetError, FatalModelError) as exc:
        return _fail(state, _context_failure(exc))
    compaction_span_of(state, request)
    return _Prepared(state, provider, shape, request, [*results.prelude, *notice_writes], wrap_up)


class _RoundShape:
    """Builds the round's request within the model's budget (see turnkeep.harness.context)."""

    def __init__(
        self,
        deps: HarnessDeps,
        storage: Storage,
        state: OperationState,
        provider: ModelProvider,
        *,
        envelope: Envelope | None,
        results: _Results,
        tools: tuple[ToolSpec, ...],
        forced_tool: str | None = None,
    ) -> None:
        # The envelope is read at every round, so a note written in round k folds into round
        # k+1; the fold is the one every path uses (`resolve_system` fed from the envelope).
        self._system = resolve_system_for_meta(
            envelope.meta if envelope is not None else {}, deps.default_system
        )
        # The stored branch ends before the previous round's results, which join as pending.
        self._view = deps.transcripts.branch_view(storage, results.committed_head)
        self._storage = storage
        self._deps, self._state, self._provider = deps, state, provider
        self._head, self._tools, self._pending = results.head, tools, results.parts
        settings = turn_model_settings(deps, state)
        if forced_tool is not None:
            # A round that must end a typed turn forces final_result (docs/agent.md).
            settings = (settings or ModelSettings()).model_copy(update={"tool_choice": forced_tool})
        self._settings = settings

    @property
    def settings(self) -> ModelSettings | None:
        """The turn's model settings (None: the defaults)."""
        return self._settings

    def prepare(self, *, target: int | None = None) -> PreparedRound:
        # The transcript holds attachment references; the request gets their bytes, or their
        # S3 objects for a model that reads them itself (docs/attachments.md, "S3 sources").
        return with_attachment_bytes(self._prepare(target), self._storage, self._s3_sources())

    def _s3_sources(self) -> S3Sources | None:
        limits = self._deps.limits
        if limits.attachment_source != "auto":
            return None
        region = self._provider.s3_source_region()
        return None if region is None else S3Sources(region, limits.attachment_bucket_owner)

    def _prepare(self, target: int | None) -> PreparedRound:
        return prepare_round(
            self._provider,
            self._view,
            system=self._system,
            tools=self._tools,
            pending=self._pending,
            limits=self._deps.limits,
            op_id=self._state.op_id,
            round_=self._state.round,
            head=self._head,
            target=target,
            settings=self._settings,
            clock=self._deps.clock,
        )


def _over_budget(deps: HarnessDeps, storage: Storage, round_: _Prepared) -> str | None:
    """The budget error of a round whose worst case (with its compaction's usage, already
    spent) would go over a budget (docs/usage.md, "Budgets")."""
    prepared = round_.request
    worst = worst_case(round_.provider, prepared.request, round_.shape.settings, prepared.tokens)
    return check_before_round(deps, storage, round_.state, worst + prepared.usage)


def _context_failure(exc: Exception) -> str:
    if isinstance(exc, ContextBudgetError):
        return str(exc)
    code = getattr(exc, "code", "model_error")
    return f"model error ({code}) while compacting the context: {exc}"


def _context_meta(prepared: PreparedRound, response: ModelResponse) -> dict[str, JsonValue]:
    """What the next rounds calibrate their estimate with (stored on the response entry)."""
    usage = response.usage
    if usage.estimated:
        # The server reported no usage: an estimate would only calibrate the estimate by itself.
        return {"estimated_input": prepared.estimated_input, "input_tokens": None}
    return {
        "estimated_input": prepared.estimated_input,
        "input_tokens": usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        "output_tokens": usage.output_tokens,
    }


@dataclass(frozen=True, slots=True)
class _Results:
    """The previous round's tool results, settled in memory before this round streams."""

    prelude: list[Write]
    """Their entries, the head move and the op state no longer listing them."""
    parts: tuple[ToolResultPart, ...]
    committed_head: str | None
    head: str | None


def _settle_tool_results(
    storage: Storage, state: OperationState
) -> tuple[OperationState, _Results]:
    """The previous round's tool results as writes to commit ahead of this round's frames.

    Events follow cause (docs/api.md): a tool's result must have a lower sequence number than
    any frame of the reply that reads it, on every orchestrator. So the results commit, fenced,
    right before the first frame; a reply that writes no frame carries them in its settlement,
    ahead of its own entry (FrameWriter's `prelude`). Returns the state after them.
    """
    paused = approval_pause_seconds(storage, state)
    settlement = settle_pending(storage, state, "the tool step did not report a result")
    if not settlement.writes:
        head = settlement.committed_head
        return state, _Results([], (), head, head)
    settled = with_child_usage(state, settlement).model_copy(
        update={
            "pending_call_ids": [],
            "pending_round": None,
            "last_entry_id": settlement.head,
            # Time spent waiting for a person does not count against the turn's wall clock.
            "deadline_at": state.deadline_at + paused,
        }
    )
    state_write = set_value(op_address(state.op_id), settled.model_dump(mode="json"))
    return settled, _Results(
        [*settlement.writes, state_write],
        tuple(settlement.results),
        settlement.committed_head,
        settlement.head,
    )


# --- Phase 3: call the provider and stream ---


@dataclass(frozen=True, slots=True)
class _Streamed:
    """What the provider answered, and the frames written while it streamed."""

    response: ModelResponse
    writer: FrameWriter


def _call_provider(
    deps: HarnessDeps, storage: Storage, round_: _Prepared, on_event: EventListener | None
) -> ModelStepOutput | _Streamed:
    """Stream the round's reply as coalesced frames (and live text); once, when the provider
    finds the request too long before any text, shrink it to half and stream again.

    A retryable model error propagates after what streamed is flushed; a fatal one, or a
    turn that ended meanwhile, returns its output.
    """
    state = round_.state
    writer = FrameWriter(
        storage,
        state.op_id,
        response_id(state.op_id, state.round),
        deps.clock,
        interval_s=deps.limits.frame_interval_ms / 1000,
        max_bytes=deps.limits.frame_max_bytes,
        prelude=round_.prelude,
    )
    live = _live_text(deps, state)
    shrunk = False
    try:
        while True:
            try:
                response = _stream(
                    round_.provider,
                    request=round_.request.request,
                    writer=writer,
                    live=live,
                    on_event=on_event,
                    wrap_up=round_.wrap_up,
                )
                return _Streamed(response, writer)
            except ModelError as exc:
                if not shrunk and exc.code == "context_length" and not writer.stats.deltas:
                    shrunk = True
                    failed = _shrink(round_, exc)
                    if failed is not None:
                        return failed
                    continue
                _flush_quietly(writer, live)
                if exc.retryable:
                    raise
                retried = " (after one compaction and a retry)" if shrunk else ""
                return _fail(state, f"model error ({exc.code}){retried}: {exc}")
    except FencedWriteError:
        return ended_output(deps, storage, state.session_id, state.op_id, state.round)
    finally:
        writer.close()


def _live_text(deps: HarnessDeps, state: OperationState) -> LiveText | None:
    """The round's live text to watchers, when the deployment pushes live deltas."""
    if deps.live is None:
        return None
    return LiveText(
        deps.live,
        state.session_id,
        state.op_id,
        response_id(state.op_id, state.round),
        deps.clock,
        interval_s=deps.limits.live_interval_ms / 1000,
    )


def _shrink(round_: _Prepared, exc: ModelError) -> ModelStepOutput | None:
    """Re-prepare the round at half its estimate after a context_length error (None: done,
    retry); the `fail` output when it cannot shrink."""
    # The provider counts differently from the estimate: shrink the request to half once
    # (compaction or window) and retry the round.
    try:
        round_.request = round_.shape.prepare(target=max(1, round_.request.tokens // 2))
    except NothingToShrinkError as inner:
        return _fail(
            round_.state,
            f"model error (context_length): {exc} (no older turn to {inner.verb}, so the "
            "round was not retried)",
        )
    except (ContextBudgetError, FatalModelError) as inner:
        return _fail(
            round_.state,
            f"model error (context_length): {exc}; shrinking the context to retry failed: "
            f"{_context_failure(inner)}",
        )
    return None


def _stream(
    provider: ModelProvider,
    *,
    request: ModelRequest,
    writer: FrameWriter,
    live: LiveText | None,
    on_event: EventListener | None,
    wrap_up: bool,
) -> ModelResponse:
    for event in provider.stream(request):
        if isinstance(event, ResponseDone):
            if live is not None:
                live.finish()  # at most one piece per interval; the entry carries the rest
            writer.finish(event.response, wrap_up=wrap_up)
            if on_event is not None:
                on_event(event)
            return event.response
        writer.add(event)
        if live is not None and isinstance(event, TextDelta):
            if writer.prelude and may_watch(live.sink, live.session_id, live.op_id):
                writer.commit_prelude()  # the tool results reach watchers before the reply
            live.add(event.text)
        if on_event is not None:
            on_event(event)
    raise RetryableModelError(
        f"{provider.name}: stream ended without a final response", code="stream_truncated"
    )


def _flush_quietly(writer: FrameWriter, live: LiveText | None) -> None:
    # Keep what streamed before a model error so recovery can record it; a fenced writer has
    # nothing to keep.
    if live is not None:
        live.flush()
    with suppress(FencedWriteError):
        writer.flush()


# --- Phase 4: settle (one fenced commit; it decides the next step) ---


def _settle_streamed(
    deps: HarnessDeps,
    storage: Storage,
    round_: _Prepared,
    streamed: _Streamed,
    timing: dict[str, JsonValue],
) -> ModelStepOutput:
    """Commit the streamed response with the prelude the frames did not carry, the context
    marker and the compaction's usage; the output names the next step."""
    prepared, state = round_.request, round_.state
    usage = prepared.usage
    if usage.input_tokens or usage.output_tokens:
        compaction = f"{state.op_id}:c{state.round}"
        charge_round(deps, state, compaction, usage, getattr(round_.provider, "name", ""))
        state = state.model_copy(update={"usage": state.usage + usage})
    return settle_response(
        deps,
        storage,
        state,
        streamed.response,
        pending_writes=[*streamed.writer.uncommitted_prelude(), *prepared.writes],
        head=prepared.head,
        wrap_up=round_.wrap_up,
        context=_context_meta(prepared, streamed.response),
        frames_written=streamed.writer.wrote_frames,
        timing=timing,
    )
