"""The turn's trace context as a W3C `traceparent` string, stored with the turn.

A turn's span ids are chosen when it starts (whether or not this process exports), so every
step, in any process or Lambda, makes its spans children of the one turn span.
"""

from __future__ import annotations

import os
import re

_TRACE_PARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def new_trace_parent() -> str:
    """A fresh sampled trace context: a random trace id and the turn span's id."""
    trace_id = os.urandom(16).hex()
    span_id = os.urandom(8).hex()
    if int(trace_id, 16) == 0 or int(span_id, 16) == 0:  # invalid by the spec: draw again
        return new_trace_parent()
    return f"00-{trace_id}-{span_id}-01"


def parse_trace_parent(text: str | None) -> tuple[int, int] | None:
    """(trace id, span id) of a `traceparent` string; None when absent or malformed."""
    if not text:
        return None
    found = _TRACE_PARENT.match(text)
    if found is None:
        return None
    trace_id, span_id = int(found.group(1), 16), int(found.group(2), 16)
    if trace_id == 0 or span_id == 0:
        return None
    return trace_id, span_id
