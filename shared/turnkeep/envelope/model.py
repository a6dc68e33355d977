"""The session envelope value."""

from __future__ import annotations

from typing import TypeAlias

from pydantic import BaseModel, ConfigDict

#: A meta value. In a worker patch, None means "unset this key".
MetaScalar: TypeAlias = str | int | float | bool


class Envelope(BaseModel):
    """The small per-session record every turn reads first (times are epoch milliseconds)."""

    model_config = ConfigDict(frozen=True, strict=True)

    session_id: str
    owner_id: str
    meta: dict[str, MetaScalar]
    created_at: int
    updated_at: int

    @property
    def working_notes(self) -> str | None:
        """The session's working notes (trimmed, within the cap), or None."""
        from turnkeep.envelope.keys import sanitize_working_notes

        return sanitize_working_notes(self.meta.get("workingNotes"))

    @property
    def parent_session_id(self) -> str | None:
        """The parent session of a child (sub-agent) session; None for any other session."""
        parent = self.meta.get("parentSessionId")
        return parent if isinstance(parent, str) else None

    def host_meta(self) -> dict[str, MetaScalar]:
        """Only the host-owned keys (what a host GET returns and a host PUT replaces)."""
        from turnkeep.envelope.keys import HOST_META_KEYS

        return {k: v for k, v in self.meta.items() if k in HOST_META_KEYS}

    def worker_meta(self) -> dict[str, MetaScalar]:
        """Only the worker-owned keys."""
        from turnkeep.envelope.keys import WORKER_META_KEYS

        return {k: v for k, v in self.meta.items() if k in WORKER_META_KEYS}
