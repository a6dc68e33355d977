"""The step functions of a turn: start_turn, model_step, tool_step, finish_turn, fail_turn.

Each step is a function of (deps, small input) -> small output and resumes from storage, so a
step delivered twice with the same input has its effects once: entry ids are deterministic,
every step first reads what an earlier delivery already committed, and the operation state
says which round is next. `cancel_turn` only marks the envelope; the next step aborts.

Modules: `begin` (begin_turn: which start mode, busy sessions, the local owner), `start`
(start_turn, new_op_id), `model` (model_step: request, stream, frames),
`settlement` (the fenced commit of a settled or interrupted round), `tool` (tool_step),
`terminal` (finish/fail/abort/cancel, turn_result), `common` (storage opening, envelope
writes, output builders).
"""

from turnkeep.harness.steps.begin import (
    SessionBusyError,
    StartGate,
    StartSlot,
    TurnOwner,
    begin_turn,
)
from turnkeep.harness.steps.common import TURN_ERROR_MAX_CHARS
from turnkeep.harness.steps.model import EventListener, model_step
from turnkeep.harness.steps.start import new_op_id, start_turn, start_turn_attached
from turnkeep.harness.steps.terminal import (
    abort_turn,
    cancel_turn,
    fail_turn,
    finish_turn,
    reconcile_envelope,
    turn_result,
)
from turnkeep.harness.steps.tool import tool_step

__all__ = [
    "TURN_ERROR_MAX_CHARS",
    "EventListener",
    "SessionBusyError",
    "StartGate",
    "StartSlot",
    "TurnOwner",
    "abort_turn",
    "begin_turn",
    "cancel_turn",
    "fail_turn",
    "finish_turn",
    "model_step",
    "new_op_id",
    "reconcile_envelope",
    "start_turn",
    "start_turn_attached",
    "tool_step",
    "turn_result",
]
