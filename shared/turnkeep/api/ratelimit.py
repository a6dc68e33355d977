"""Per-session turn-start rate limit: a fixed window kept in the envelope's worker keys.

`turnRateWindowStartedAt` (epoch ms) and `turnRateWindowCount` are updated with a
compare-and-set on their stored values, so concurrent starts from several Lambdas never exceed
the limit. A start that is refused later (409) still used its slot: the limit counts attempts.
"""

from __future__ import annotations

import math

from turnkeep.api.errors import ApiError, not_found
from turnkeep.envelope import Envelope, EnvelopeConflictError, EnvelopeStore

_ATTEMPTS = 3


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
    window_ms = max(1, int(window_seconds * 1000))
    for attempt in range(_ATTEMPTS):
        if attempt or envelope is None:
            envelope = envelopes.get_for_owner(owner_id, session_id)
        if envelope is None:
            raise not_found("session")
        started = envelope.meta.get("turnRateWindowStartedAt")
        count = envelope.meta.get("turnRateWindowCount")
        in_window = (
            isinstance(started, int)
            and isinstance(count, int)
            and started <= now_ms < started + window_ms
        )
        if in_window and isinstance(started, int) and isinstance(count, int):
            if count >= limit:
                retry_after = max(1, math.ceil((started + window_ms - now_ms) / 1000))
                raise ApiError(
                    429,
                    "rate_limited",
                    f"this session already started {count} turns in the last "
                    f"{window_seconds:g} s (limit {limit}); retry in {retry_after} s",
                    headers={"Retry-After": str(retry_after)},
                )
            patch: dict[str, int | None] = {"turnRateWindowCount": count + 1}
        else:
            patch = {"turnRateWindowStartedAt": now_ms, "turnRateWindowCount": 1}
        try:
            envelopes.update_worker_meta(
                session_id,
                patch,
                expect={
                    "turnRateWindowStartedAt": [started],
                    "turnRateWindowCount": [count],
                },
                owner_id=owner_id,
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
