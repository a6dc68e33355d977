"""Per-session turn-start rate limit: a fixed window kept in the envelope's worker keys.

`turnRateWindowStartedAt` (epoch ms) and `turnRateWindowCount` are updated with a
compare-and-set on their stored values, so concurrent starts from several Lambdas never exceed
the limit. A start that is refused later (409) still used its slot: the limit counts attempts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from turnkeep.api.errors import ApiError, not_found
from turnkeep.envelope import Envelope, EnvelopeConflictError, EnvelopeStore, MetaScalar
from turnkeep.harness import StartSlot

_ATTEMPTS = 3


def start_slot(
    meta: Mapping[str, object], *, limit: int, window_seconds: float, now_ms: int
) -> StartSlot:
    """The write taking a start slot of the window `meta` shows, or a 429 `ApiError`."""
    window_ms = max(1, int(window_seconds * 1000))
    started = meta.get("turnRateWindowStartedAt")
    count = meta.get("turnRateWindowCount")
    expect: dict[str, list[MetaScalar | None]] = {
        "turnRateWindowStartedAt": [started if isinstance(started, int) else None],
        "turnRateWindowCount": [count if isinstance(count, int) else None],
    }
    if (
        isinstance(started, int)
        and isinstance(count, int)
        and started <= now_ms < started + window_ms
    ):
        if count >= limit:
            retry_after = max(1, math.ceil((started + window_ms - now_ms) / 1000))
            raise ApiError(
                429,
                "rate_limited",
                f"this session already started {count} turns in the last "
                f"{window_seconds:g} s (limit {limit}); retry in {retry_after} s",
                headers={"Retry-After": str(retry_after)},
            )
        return StartSlot({"turnRateWindowCount": count + 1}, expect)
    return StartSlot({"turnRateWindowStartedAt": now_ms, "turnRateWindowCount": 1}, expect)


def reserve_turn_start(
    envelopes: EnvelopeStore,
    session_id: str,
    owner_id: str,
    *,
    limit: int,
    window_seconds: float,
    now_ms: int,
    envelope: Envelope | None = None,
) -> None:
    """Take one start slot of the session's current window, or raise a 429 `ApiError`.

    `envelope`: the caller's envelope as just read (saves the first re-read)."""
    for attempt in range(_ATTEMPTS):
        if attempt or envelope is None:
            envelope = envelopes.get_for_owner(owner_id, session_id)
        if envelope is None:
            raise not_found("session")
        slot = start_slot(envelope.meta, limit=limit, window_seconds=window_seconds, now_ms=now_ms)
        try:
            envelopes.update_worker_meta(
                session_id, slot.patch, expect=slot.expect, owner_id=owner_id
            )
            return
        except EnvelopeConflictError:
            continue  # another start won the race; re-read the window
    raise ApiError(
        429,
        "rate_limited",
        "too many concurrent turn starts for this session; retry shortly",
        headers={"Retry-After": "1"},
    )


class RateGate:
    """The harness's `StartGate` for one API request: the session's window, 429 when spent."""

    def __init__(
        self,
        envelopes: EnvelopeStore,
        owner_id: str,
        *,
        limit: int,
        window_seconds: float,
        now_ms: int,
    ) -> None:
        self._envelopes = envelopes
        self._owner_id = owner_id
        self._limit = limit
        self._window_seconds = window_seconds
        self._now_ms = now_ms

    def slot(self, meta: Mapping[str, object]) -> StartSlot:
        """The write taking a slot of the window `meta` shows, or a 429 `ApiError`."""
        return start_slot(
            meta, limit=self._limit, window_seconds=self._window_seconds, now_ms=self._now_ms
        )

    def reserve(self, envelope: Envelope) -> None:
        """Take a slot of the session's current window, or raise a 429 `ApiError`."""
        reserve_turn_start(
            self._envelopes,
            envelope.session_id,
            self._owner_id,
            limit=self._limit,
            window_seconds=self._window_seconds,
            now_ms=self._now_ms,
            envelope=envelope,
        )
