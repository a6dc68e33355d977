"""Who is calling: the user id comes from the platform, never from the request body.

- `JwtClaimsAuthenticator` (Lambda): the `sub` claim that API Gateway's JWT authorizer verified,
  read from the Mangum scope (`scope["aws.event"]["requestContext"]["authorizer"]["jwt"]
  ["claims"]`). It ignores every header, so a dev token means nothing in the cloud.
- `LocalDevAuthenticator` (local server only): `Authorization: Bearer dev-<user>`.
- `SamLocalAuthenticator` (the Lambda handler under `sam local` only): the claims when the event
  carries them (`sam local invoke -e events/api/...`), else a dev token, because `sam local
  start-api` runs no JWT authorizer. `lambda_authenticator()` picks it only when SAM's own
  container marker `AWS_SAM_LOCAL=true` is set; the template never sets it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Protocol

from starlette.requests import Request

from turnkeep.api.errors import ApiError
from turnkeep.envelope import MetaValidationError
from turnkeep.envelope.keys import validate_owner_id

DEV_TOKEN_PREFIX = "dev-"  # nosec B105  # the local dev-token prefix, not a password
_DEV_USER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


def unauthenticated(message: str) -> ApiError:
    """401 with a JSON error body."""
    return ApiError(401, "unauthenticated", message, headers={"WWW-Authenticate": "Bearer"})


class Authenticator(Protocol):
    """Resolves the caller's user id from a request, or raises a 401 `ApiError`."""

    local: bool
    """True only for the local dev-token authenticator."""

    def user_id(self, request: Request) -> str:
        """The authenticated user id of `request`."""
        ...


class JwtClaimsAuthenticator:
    """The `sub` claim of API Gateway's JWT authorizer (HTTP API, payload format 2.0)."""

    local = False

    def __init__(self, claim: str = "sub") -> None:
        self.claim = claim

    def user_id(self, request: Request) -> str:
        """The verified claim; 401 when the event carries no authorizer claims."""
        event = request.scope.get("aws.event")
        claims = _dig(event, "requestContext", "authorizer", "jwt", "claims")
        subject = claims.get(self.claim) if isinstance(claims, dict) else None
        if not isinstance(subject, str) or not subject:
            raise unauthenticated(f"no verified {self.claim!r} claim on the request")
        try:
            return validate_owner_id(subject)
        except MetaValidationError as exc:
            raise unauthenticated(
                f"the {self.claim!r} claim is not a usable user id: {exc}"
            ) from exc


class LocalDevAuthenticator:
    """Local mode only: `Authorization: Bearer dev-<user>` names the user (no secret at all)."""

    local = True

    def user_id(self, request: Request) -> str:
        """The user of the dev token; 401 when absent or malformed."""
        header = request.headers.get("authorization")
        if not header:
            raise unauthenticated("missing Authorization header; send 'Bearer dev-<user>'")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token.startswith(DEV_TOKEN_PREFIX):
            raise unauthenticated(
                "the local server accepts only 'Authorization: Bearer dev-<user>'"
            )
        user = token[len(DEV_TOKEN_PREFIX) :]
        if not _DEV_USER.match(user):
            raise unauthenticated(
                "dev token user must be 1-128 characters of A-Z a-z 0-9 . _ @ -, "
                "starting with a letter or digit"
            )
        return user


class SamLocalAuthenticator:
    """`sam local` only: the JWT authorizer's claims when present, else a dev token."""

    local = True

    def __init__(self) -> None:
        self._claims = JwtClaimsAuthenticator()
        self._dev = LocalDevAuthenticator()

    def user_id(self, request: Request) -> str:
        """The `sub` claim of an event that carries one, else the dev token's user."""
        event = request.scope.get("aws.event")
        if _dig(event, "requestContext", "authorizer", "jwt", "claims") is not None:
            return self._claims.user_id(request)
        return self._dev.user_id(request)


SAM_LOCAL_MARKER = "AWS_SAM_LOCAL"


def lambda_authenticator(environ: Mapping[str, str] = os.environ) -> Authenticator:
    """The API Lambda's authenticator: JWT claims, or `SamLocalAuthenticator` when (and only
    when) the function runs in a `sam local` container, which sets `AWS_SAM_LOCAL=true`."""
    if environ.get(SAM_LOCAL_MARKER) == "true":
        return SamLocalAuthenticator()
    return JwtClaimsAuthenticator()


def _dig(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
