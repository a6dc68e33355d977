"""The harness runtime: a turn is an operation driven by small, idempotent step functions."""

from turnkeep.harness.deps import HarnessDeps, HarnessLimits
from turnkeep.harness.errors import (
    FencedWriteError,
    HarnessError,
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
from turnkeep.harness.orchestrator import ToolOutcome, resume_turn, run_turn
from turnkeep.harness.steps import (
    abort_turn,
    cancel_turn,
    fail_turn,
    finish_turn,
    model_step,
    new_op_id,
    start_turn,
    tool_step,
    turn_result,
)

__all__ = [
    "CancelResult",
    "FailTurnInput",
    "FencedWriteError",
    "FinishTurnInput",
    "HarnessDeps",
    "HarnessError",
    "HarnessLimits",
    "ModelStepInput",
    "ModelStepOutput",
    "OperationNotFoundError",
    "SessionNotFoundError",
    "StartTurnInput",
    "StartTurnOutput",
    "StepInputError",
    "ToolOutcome",
    "ToolStepInput",
    "ToolStepOutput",
    "TurnConflictError",
    "TurnResult",
    "abort_turn",
    "cancel_turn",
    "fail_turn",
    "finish_turn",
    "model_step",
    "new_op_id",
    "resume_turn",
    "run_turn",
    "start_turn",
    "tool_step",
    "turn_result",
]
