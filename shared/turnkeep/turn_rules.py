"""The turn's rules every layer shares: the turn (operation) id rule and the status set, with
its active, terminal and startable subsets (docs/harness.md, docs/envelope.md `turnStatus`)."""

from __future__ import annotations

import re
from typing import Final, Literal, get_args

TurnStatus = Literal[
    "idle", "running", "cancelling", "awaiting_approval", "completed", "failed", "aborted"
]
"""A turn's status as the envelope and the harness record it."""
TerminalStatus = Literal["completed", "failed", "aborted"]
"""How a turn ended."""

TURN_STATUSES: Final[frozenset[str]] = frozenset(get_args(TurnStatus))
ACTIVE_STATUSES: Final[frozenset[str]] = frozenset({"running", "cancelling", "awaiting_approval"})
"""Statuses of a turn that has not ended (yet: the envelope may lag storage)."""
STARTABLE_STATUSES: Final[list[str | None]] = [None, "idle", "completed", "failed", "aborted"]
"""Envelope statuses under which a new turn may start (None: no turn yet)."""

DELETE_MARKER: Final = "__deleting__"
"""`turnRunId` while a session DELETE runs: blocks turn starts (never a valid operation id;
docs/api.md). The API, the CLI and the local owner all read this one constant."""

OP_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$"
"""Turn (operation) ids: 1-100 characters of [A-Za-z0-9._:-], no '/' (call keys are `op/call`)."""
OP_ID_MAX_LENGTH: Final = 100
_OP_ID: Final = re.compile(OP_ID_PATTERN)


def op_id_problem(value: object) -> str | None:
    """Why `value` is not a turn (operation) id (a sentence naming the rule), or None."""
    if isinstance(value, str) and _OP_ID.match(value):
        return None
    return (
        f"operation id {value!r} is invalid: use 1-100 characters of A-Z a-z 0-9 . _ : -, "
        "starting with a letter or digit"
    )


def is_active(status: object) -> bool:
    """Whether an envelope `turnStatus` value names a turn that has not ended."""
    return status in ACTIVE_STATUSES
