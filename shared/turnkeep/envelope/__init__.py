"""The session envelope: owner, ids, timestamps and a `meta` map of scalar reserved keys.

Host keys are replaced as a full set by the host PUT; worker keys are written field-level by
the turn harness and the working-notes tools. See docs/envelope.md for caps and ownership.
"""

from __future__ import annotations

from turnkeep.envelope import caps
from turnkeep.envelope.base import EnvelopeStore, wall_clock_ms
from turnkeep.envelope.errors import (
    EnvelopeClosedError,
    EnvelopeConflictError,
    EnvelopeError,
    EnvelopeExistsError,
    EnvelopeNotFoundError,
    EnvelopeUnavailableError,
    MetaValidationError,
)
from turnkeep.envelope.factory import open_envelope_store
from turnkeep.envelope.keys import (
    HOST_META_KEYS,
    KEY_SPECS,
    REASONING_EFFORTS,
    RESERVED_META_KEYS,
    WORKER_META_KEYS,
    sanitize_working_notes,
    status_of_turn,
    turn_run_id,
    turn_status,
)
from turnkeep.envelope.memory import MemoryEnvelopeStore
from turnkeep.envelope.model import Envelope, MetaScalar
from turnkeep.turn_rules import TURN_STATUSES

__all__ = [
    "HOST_META_KEYS",
    "KEY_SPECS",
    "REASONING_EFFORTS",
    "RESERVED_META_KEYS",
    "TURN_STATUSES",
    "WORKER_META_KEYS",
    "Envelope",
    "EnvelopeClosedError",
    "EnvelopeConflictError",
    "EnvelopeError",
    "EnvelopeExistsError",
    "EnvelopeNotFoundError",
    "EnvelopeStore",
    "EnvelopeUnavailableError",
    "MemoryEnvelopeStore",
    "MetaScalar",
    "MetaValidationError",
    "caps",
    "open_envelope_store",
    "sanitize_working_notes",
    "status_of_turn",
    "turn_run_id",
    "turn_status",
    "wall_clock_ms",
]
