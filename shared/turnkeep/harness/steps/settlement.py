"""Settling a model round: one fenced session commit records the response (or an interrupted
one), the previous round's tool results, usage, call states and the new op state."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.envelope_io import commit_mirrored
from turnkeep.harness.errors import StepInputError
from turnkeep.harness.io import ModelStepOutput, NextAction
from turnkeep.harness.recovery import Settlement, interrupted_response_writes
from turnkeep.harness.spend_gate import charge_round, check_after_round
from turnkeep.harness.state import (
    CallState,
    OperationState,
    call_address,
    frames_scope,
    head_address,
    op_address,
    response_id,
)
from turnkeep.harness.steps.common import clip, progress_patch, turn_model_settings
from turnkeep.harness.steps.model_outputs import ended_output, fail_output
from turnkeep.harness.transcript import entry_data, message_from_json, usage_json
from turnkeep.harness.typed_output import OutputDecision, decide_output, turn_output
from turnkeep.providers.base import Message, ModelResponse
from turnkeep.spend.pricing import price_for, priced, usage_row
from turnkeep.storage import (
    MESSAGE_ENTRY_TYPE,
    GuardFailedError,
    JsonValue,
    Storage,
    Write,
    insert_entry,
    insert_usage,
    retire_scope,
    set_value,
)


def settle_response(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    response: ModelResponse,
    *,
    pending_writes: list[Write],
    head: str | None,
    wrap_up: bool = False,
    context: dict[str, JsonValue] | None = None,
    frames_written: bool = False,
    timing: dict[str, JsonValue] | None = None,
) -> ModelStepOutput:
    """One session transaction: pending tool results, the response entry, usage, op state.

    `context` (the request's token estimate, for the budget's calibration) joins the entry, and
    so does `timing` (when the provider call started and ended: the turn's timeline).
    `frames_written`: the round wrote frames, so the same transaction retires their scope.
    """
    op = state.op_id
    price = price_for(deps.provider_for(state.model), turn_model_settings(deps, state))
    response = replace(response, usage=priced(response.usage, price))
    # Charged before the commit, once per round key: the call was made and paid for even if
    # the turn ended meanwhile, and a redelivery charges nothing twice.
    charge_round(deps, state, response_id(op, state.round), response.usage, response.model)
    call_ids = [c.id for c in response.message.tool_calls]
    if len(set(call_ids)) != len(call_ids):
        repeated = sorted(c for c, n in Counter(call_ids).items() if n > 1)
        return fail_output(
            state.session_id, op, state.round, f"model error: duplicate tool call ids {repeated}"
        )
    limit = deps.limits.max_tool_calls_per_round
    decision = _typed_decision(deps, state, response, wrap_up=wrap_up)
    next_action, run_ids = _route(decision, call_ids[:limit], wrap_up=wrap_up)
    typed: dict[str, JsonValue] = {}
    if decision is not None:
        # A redelivery of the settled round rebuilds this output from its entry.
        typed = {"typed_next": next_action, "typed_run": list(run_ids)}
        if decision.error is not None:
            typed["typed_error"] = decision.error
    writes = [
        *pending_writes,
        *_response_writes(
            state, response, head, wrap_up=wrap_up, context=context, timing=timing, typed=typed
        ),
        *_call_writes(
            state,
            response,
            limit,
            wrap_up=wrap_up,
            answered=decision.answered if decision is not None else {},
        ),
    ]
    new_state = state.model_copy(
        update={
            "round": state.round + 1,
            "pending_call_ids": call_ids,
            "pending_round": state.round,
            "wrap_up_done": state.wrap_up_done or wrap_up,
            "interrupted_rounds": 0,
            "usage": state.usage + response.usage,
            "last_entry_id": response_id(op, state.round),
            **(decision.update if decision is not None else {}),
        }
    )
    output = _commit_round(
        deps,
        storage,
        state,
        new_state,
        writes,
        next_action=next_action,
        call_ids=run_ids,
        wrap_up=wrap_up,
        frames_written=frames_written,
        error=decision.error if decision is not None else None,
    )
    if output.next == "done":
        return output
    over = check_after_round(deps, storage, new_state)
    # The round's text is stored; failing now keeps it and runs none of its tool calls.
    return output if over is None else fail_output(state.session_id, op, output.next_round, over)


def _typed_decision(
    deps: HarnessDeps, state: OperationState, response: ModelResponse, *, wrap_up: bool
) -> OutputDecision | None:
    """A typed turn's decision about the round's result (None: a text turn)."""
    spec = turn_output(deps, state)
    if spec is None:
        return None
    ends = wrap_up or state.round + 1 >= deps.limits.max_steps
    return decide_output(spec, state, response, deps.agent.output_retries, ends=ends)


def _route(
    decision: OutputDecision | None, call_ids: list[str], *, wrap_up: bool
) -> tuple[NextAction, list[str]]:
    """The next step and the calls it runs: a typed result's decision comes first; calls it
    answered never run; a typed round with nothing left to run goes back to the model."""
    if decision is not None and decision.next is not None:
        return decision.next, []
    answered = decision.answered if decision is not None else {}
    run = [] if wrap_up else [c for c in call_ids if c not in answered]
    if run:
        return "tools", run
    return ("model" if decision is not None and not wrap_up else "finish"), []


def _response_writes(
    state: OperationState,
    response: ModelResponse,
    head: str | None,
    *,
    wrap_up: bool,
    context: dict[str, JsonValue] | None,
    timing: dict[str, JsonValue] | None = None,
    typed: dict[str, JsonValue] | None = None,
) -> list[Write]:
    """The round's response entry after `head`, the head moved to it, and its usage row."""
    entry_id = response_id(state.op_id, state.round)
    usage = response.usage
    data = entry_data(
        response.message,
        op=state.op_id,
        round=state.round,
        interrupted=False,
        stop_reason=response.stop_reason,
        wrap_up=wrap_up,
        model=response.model,
        **({"context": context} if context is not None else {}),
        **({"timing": timing} if timing is not None else {}),
        usage=usage_json(usage),
        **(typed or {}),
    )
    return [
        insert_entry(entry_id, head, MESSAGE_ENTRY_TYPE, data),
        set_value(head_address(), entry_id),
        insert_usage(usage_row(usage, response.model, state.op_id)),
    ]


def _call_writes(
    state: OperationState,
    response: ModelResponse,
    limit: int,
    *,
    wrap_up: bool,
    answered: dict[str, tuple[str, bool]],
) -> list[Write]:
    """A call state per tool call; the calls past `limit`, and those a typed result's decision
    `answered` (content, is_error), are answered now, never run."""
    calls = response.message.tool_calls
    writes: list[Write] = []
    for index, call in enumerate(calls):
        call_state = CallState(
            call_id=call.id, name=call.name, arguments=call.arguments, round=state.round
        )
        if call.id in answered:
            content, is_error = answered[call.id]
            call_state = call_state.model_copy(
                update={"phase": "done", "is_error": is_error, "content": content}
            )
        elif index >= limit and not wrap_up:
            # Answered now, never run: the step output lists at most `limit` call ids.
            call_state = call_state.model_copy(
                update={
                    "phase": "done",
                    "is_error": True,
                    "content": f"Error: tool call not run: the model made {len(calls)} tool "
                    f"calls in one round and the limit is {limit}. Make fewer calls at a time.",
                }
            )
        writes.append(
            set_value(call_address(state.op_id, call.id), call_state.model_dump(mode="json"))
        )
    return writes


def settle_interrupted(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    partial: Message,
    settlement: Settlement,
) -> ModelStepOutput:
    """Record a round that died mid-stream as an interrupted response; the next round retries."""
    op = state.op_id
    entry_id = response_id(op, state.round)
    writes = [
        *settlement.writes,
        *interrupted_response_writes(op, state.round, settlement.head, partial),
    ]
    new_state = state.model_copy(
        update={
            "round": state.round + 1,
            "pending_call_ids": [],
            "pending_round": None,
            "interrupted_rounds": state.interrupted_rounds + 1,
            "last_entry_id": entry_id,
        }
    )
    # Only frames make a round interrupted (a recorded partial reply), so their scope retires.
    return _commit_round(
        deps,
        storage,
        state,
        new_state,
        writes,
        next_action="model",
        interrupted=True,
        frames_written=True,
    )


def _commit_round(
    deps: HarnessDeps,
    storage: Storage,
    state: OperationState,
    new_state: OperationState,
    writes: list[Write],
    *,
    next_action: NextAction,
    call_ids: list[str] | None = None,
    interrupted: bool = False,
    wrap_up: bool = False,
    frames_written: bool = False,
    error: str | None = None,
) -> ModelStepOutput:
    """Commit a settled round with the new op state, fenced: the round's output (`next_action`
    to round + 1) if it committed, the `done` output if the turn ended meanwhile (the round is
    then not recorded)."""
    op = state.op_id
    writes.append(set_value(op_address(op), new_state.model_dump(mode="json")))
    if frames_written:
        # The entry supersedes the frames: retired with it, never read again (the terminal
        # commit then has no frame object to load; docs/aws-storage.md).
        writes.append(retire_scope(frames_scope(response_id(op, state.round))))
    try:
        # The envelope's progress mirror rides in the same request where it can.
        commit_mirrored(
            deps,
            storage,
            writes,
            guard=op_address(op),
            patch_for=lambda seqs: progress_patch(seqs[-1], new_state),
            expect={"turnRunId": [op]},
        )
    except GuardFailedError:
        return ended_output(deps, storage, state.session_id, op, state.round)
    return ModelStepOutput(
        session_id=state.session_id,
        op_id=op,
        round=state.round,
        next=next_action,
        next_round=state.round + 1,
        call_ids=call_ids or [],
        interrupted=interrupted,
        wrap_up=wrap_up,
        error=clip(error) if error is not None else None,
    )


def recorded_output(
    storage: Storage, state: OperationState, round_: int, call_limit: int
) -> ModelStepOutput:
    """The output an earlier delivery of settled round `round_` returned, rebuilt from its entry."""
    found = storage.get_entries([response_id(state.op_id, round_)])
    if not found or not isinstance(found[0].data, dict):
        raise StepInputError(f"operation {state.op_id!r} has no settled model round {round_}")
    data = found[0].data
    call_ids = [c.id for c in message_from_json(data.get("message")).tool_calls]
    interrupted = bool(data.get("interrupted"))
    wrap_up = bool(data.get("wrap_up"))
    typed_next = data.get("typed_next")
    if isinstance(typed_next, str):
        run = data.get("typed_run")
        error = data.get("typed_error")
        return ModelStepOutput(
            session_id=state.session_id,
            op_id=state.op_id,
            round=round_,
            next=typed_next,  # type: ignore[arg-type]
            next_round=round_ + 1,
            call_ids=[str(c) for c in run] if isinstance(run, list) else [],
            wrap_up=wrap_up,
            error=error if isinstance(error, str) else None,
        )
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
