"""Pages of a caller's session list: oldest or newest first, resumed after an opaque cursor.

The cursor is `<created_at>.<session_id>` of the last session of the previous page; a page holds
the sessions strictly after it in the order asked for, so a session deleted between two pages
never shifts the next one (no offsets).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from turnkeep.envelope import Envelope

SESSION_CURSOR_PATTERN = r"^[0-9]{1,16}\.[A-Za-z0-9._:-]{1,128}$"


def session_cursor(envelope: Envelope) -> str:
    """The cursor that resumes a listing after `envelope`."""
    return f"{envelope.created_at}.{envelope.session_id}"


def _key(cursor: str) -> tuple[int, str]:
    created, _, session_id = cursor.partition(".")
    return int(created), session_id


def session_page(
    envelopes: Sequence[Envelope],
    *,
    order: Literal["oldest", "newest"],
    cursor: str | None,
    limit: int | None,
) -> tuple[list[Envelope], str | None]:
    """One page of `envelopes` (sorted oldest first) and the next page's cursor (None: last)."""
    ordered = list(envelopes) if order == "oldest" else list(reversed(envelopes))
    if cursor is not None:
        after = _key(cursor)
        if order == "oldest":
            ordered = [e for e in ordered if (e.created_at, e.session_id) > after]
        else:
            ordered = [e for e in ordered if (e.created_at, e.session_id) < after]
    if limit is None or len(ordered) <= limit:
        return ordered, None
    page = ordered[:limit]
    return page, session_cursor(page[-1])
