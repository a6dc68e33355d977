"""Read models of the sessions routes: envelope -> SessionView (the turn views and event
pages are `turnkeep.events`).
"""

from __future__ import annotations

import json
from typing import Any

from turnkeep.api.models import SessionUsage, SessionView, TurnSummary
from turnkeep.envelope import Envelope, turn_run_id, turn_status
from turnkeep.storage import StorageStats
from turnkeep.turn_rules import DELETE_MARKER


def session_view(envelope: Envelope, usage: StorageStats | None = None) -> SessionView:
    """The owner's view of an envelope: host meta plus the latest turn summary, and the
    session's usage totals when `usage` (its storage's stats) is given."""
    meta = envelope.meta
    return SessionView(
        session_id=envelope.session_id,
        created_at=envelope.created_at,
        updated_at=envelope.updated_at,
        meta=envelope.host_meta(),
        turn=turn_summary(meta),
        has_working_notes=envelope.working_notes is not None,
        parent_session_id=envelope.parent_session_id,
        usage=None if usage is None else session_usage(usage),
    )


def session_usage(stats: StorageStats) -> SessionUsage:
    """A session's token and cost totals from its storage's stats."""
    return SessionUsage(
        input_tokens=stats.input_tokens,
        output_tokens=stats.output_tokens,
        cache_read_tokens=stats.cache_read_tokens,
        cache_write_tokens=stats.cache_write_tokens,
        cost_micros=stats.cost_micros,
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
