"""The one session-id rule, shared by storage, the envelope store and the API: 1-128
characters of `A-Z a-z 0-9 . _ : -`, starting with a letter or digit, so an id is safe as a
file name, an S3 key part and a DynamoDB key without escaping (docs/storage.md)."""

from __future__ import annotations

import re
from typing import Final

SESSION_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
SESSION_ID_MAX_LENGTH: Final = 128
_SESSION_ID: Final = re.compile(SESSION_ID_PATTERN)


def session_id_problem(value: object) -> str | None:
    """Why `value` is not a session id (a sentence naming the rule), or None when it is one."""
    if isinstance(value, str) and _SESSION_ID.match(value):
        return None
    return (
        f"session id {value!r} is invalid: use 1-128 characters of A-Z a-z 0-9 . _ : -, "
        "starting with a letter or digit"
    )
