"""The WebSocket API's `$connect` authorizer (a Lambda REQUEST authorizer).

A connection is the caller's by one of two credentials:
- an `Authorization: Bearer <JWT>` header (the CLI), verified as the HTTP API's JWT authorizer
  does: signed by a key of the issuer's JWKS (fetched once per container, again only for an
  unknown key id), `iss` equal to the issuer, `aud` or `client_id` equal to the audience (API
  Gateway accepts either), not expired, with a `sub`;
- a `ticket` query parameter (browsers cannot set headers on a WebSocket): a single-use ticket
  of `POST /live/tickets`, redeemed atomically (`turnkeep.live.tickets`); the connection is the
  ticket's user.
A JWT in the URL (`?token=`) is refused: access logs, proxies and browser history keep URLs.
A connection whose credential fails any check is refused with 401 (`Unauthorized`) and nothing
is recorded.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from turnkeep.live.tickets import TicketRefused, TicketStore

REFETCH_AFTER_S: Final = 300.0
"""An unknown key id refetches the JWKS at most this often (key rotation, not a flood)."""
FETCH_TIMEOUT_S: Final = 5.0
LEEWAY_S: Final = 30


class Unauthorized(Exception):
    """The connection is refused with 401; `reason` says why (for the log, never the client)."""

    def __init__(self, reason: str = "token missing or invalid") -> None:
        super().__init__("Unauthorized")
        self.reason = reason


def fetch_json(url: str) -> Any:
    """GET `url` and parse its JSON body."""
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as answer:
        return json.loads(answer.read())


@dataclass
class JwksCache:
    """The issuer's key set, fetched on first use and kept for the container."""

    url: str
    fetch: Callable[[str], Any] = fetch_json
    clock: Callable[[], float] = time.monotonic
    _keys: Any = None
    _fetched_at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    fetches: int = 0

    def key_set(self, kid: str | None) -> Any:
        """The key set holding `kid` (refetched once if it is unknown and the copy is old)."""
        from joserfc.jwk import KeySet

        with self._lock:
            if self._keys is None or (
                not self._has(kid) and self.clock() - self._fetched_at >= REFETCH_AFTER_S
            ):
                self._keys = KeySet.import_key_set(self.fetch(self.url))
                self._fetched_at = self.clock()
                self.fetches += 1
            return self._keys

    def _has(self, kid: str | None) -> bool:
        return kid is not None and any(k.kid == kid for k in self._keys.keys)


@dataclass(frozen=True)
class JwtVerifier:
    """Checks a token as the HTTP API's JWT authorizer does; returns its `sub`."""

    issuer: str
    audience: str
    jwks: JwksCache
    now: Callable[[], float] = time.time

    def subject(self, token: str) -> str:
        """The verified token's `sub`; `Unauthorized` for any failed check."""
        from joserfc import jws, jwt
        from joserfc.errors import JoseError

        try:
            header = jws.extract_compact(token.encode("ascii")).protected
            decoded = jwt.decode(token, self.jwks.key_set(header.get("kid")), algorithms=["RS256"])
        except (JoseError, ValueError, UnicodeEncodeError):
            raise Unauthorized from None
        claims: Mapping[str, Any] = decoded.claims
        if claims.get("iss") != self.issuer:
            raise Unauthorized
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.audience not in audiences and claims.get("client_id") != self.audience:
            raise Unauthorized
        expires = claims.get("exp")
        if not isinstance(expires, int | float) or expires + LEEWAY_S < self.now():
            raise Unauthorized
        not_before = claims.get("nbf")
        if isinstance(not_before, int | float) and not_before - LEEWAY_S > self.now():
            raise Unauthorized
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise Unauthorized
        return subject


def _query(event: Mapping[str, Any]) -> Mapping[str, Any]:
    query = event.get("queryStringParameters") or {}
    return query if isinstance(query, dict) else {}


def bearer_of(event: Mapping[str, Any]) -> str:
    """The bearer token of a `$connect` request's `Authorization` header; `Unauthorized` when
    there is none."""
    headers = event.get("headers") or {}
    for name, value in headers.items() if isinstance(headers, dict) else []:
        if name.lower() == "authorization" and isinstance(value, str):
            scheme, _, credentials = value.partition(" ")
            if scheme.lower() == "bearer" and credentials:
                return credentials.strip()
    raise Unauthorized("no Authorization header and no ticket")


def subject_of(event: Mapping[str, Any], verifier: JwtVerifier, tickets: TicketStore) -> str:
    """The user a `$connect` request connects as: its ticket's (used up here), else its bearer
    token's `sub`; `Unauthorized` otherwise."""
    query = _query(event)
    if "token" in query:  # refused, never read: URLs are kept by logs, proxies and history
        raise Unauthorized("a token in the URL is refused (use the header or a ticket)")
    ticket = query.get("ticket")
    if ticket is not None:
        try:
            return tickets.redeem(ticket if isinstance(ticket, str) else "")
        except TicketRefused:
            raise Unauthorized("ticket unknown, already used or expired") from None
    return verifier.subject(bearer_of(event))


def authorize(
    event: Mapping[str, Any], verifier: JwtVerifier, tickets: TicketStore
) -> dict[str, Any]:
    """The Allow policy for this connection, with `sub` in its context; `Unauthorized` else."""
    subject = subject_of(event, verifier, tickets)
    return {
        "principalId": subject,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Action": "execute-api:Invoke",
                    "Effect": "Allow",
                    "Resource": event.get("methodArn", ""),
                }
            ],
        },
        "context": {"sub": subject},
    }
