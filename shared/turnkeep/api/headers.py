"""Request headers that must appear at most once (RFC 9110 §5.3: not list-valued).

Two `Authorization` headers name two callers, two `Content-Length`s two bodies, two `Host`s
two origins; servers and proxies disagree on which one wins, so the API refuses them all.
"""

from __future__ import annotations

from collections.abc import Iterable

SINGLETON_HEADERS = frozenset({b"authorization", b"content-length", b"host", b"content-type"})


def duplicated_singleton(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The first singleton header name (lower case) that `headers` carries twice, else None."""
    seen: set[bytes] = set()
    for raw_name, _ in headers:
        name = raw_name.lower()
        if name in SINGLETON_HEADERS:
            if name in seen:
                return name.decode("latin-1")
            seen.add(name)
    return None
