"""Read models of the sessions routes: envelope -> SessionView (the turn views and event
pages are `turnkeep.events`).
"""

from __future__ import annotations

import json
from typing import Any

from turnkeep.api.models import SessionView, TurnSummary
from turnkeep.envelope import Envelope, turn_run_id, turn_status
from turnkeep.turn_rules import DELETE_MARKER


def session_view(envelope: Envelope) -> SessionView:
    """The owner's view of an envelope: host meta plus the latest turn summary."""
    meta = envelope.meta
    return SessionView(
        session_id=envelope.session_id,
        created_at=envelope.created_at,
        updated_at=envelope.updated_at,
        meta=envelope.host_meta(),
        turn=turn_summary(meta),
        has_working_notes=envelope.working_notes is not None,
    )


def turn_summary(meta: dict[str, Any]) -> TurnSummary:
    """The latest turn as the envelope's worker keys record it."""
    run_id = turn_run_id(meta)
    if run_id == DELETE_MARKER:
        return TurnSummary(status="deleting")
    status = turn_status(meta)
    usage: dict[str, Any] | None = None
    raw_usage = meta.get("usage")
    if isinstance(raw_usage, str):
        try:
            parsed = json.loads(raw_usage)
        except ValueError:
            parsed = None
        usage = parsed if isinstance(parsed, dict) else None
    return TurnSummary(
        turn_id=run_id,
        status=status or "idle",
        started_at=_int(meta.get("turnStartedAt")),
        finished_at=_int(meta.get("turnFinishedAt")),
        error=meta.get("turnError") if isinstance(meta.get("turnError"), str) else None,
        step_count=_int(meta.get("turnStepCount")),
        usage=usage,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
