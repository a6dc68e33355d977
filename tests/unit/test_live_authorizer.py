"""The WebSocket `$connect` authorizer verifies the HTTP API's JWT: signature against the
issuer's JWKS (fetched once per container, again only for an unknown key), issuer, audience or
client id, expiry, a subject; anything else is refused with `Unauthorized` (401). The JWKS is
served by a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from turnkeep.live.authorizer import JwksCache, JwtVerifier, Unauthorized, authorize

AUDIENCE = "app-client"


class Issuer:
    """A JWKS endpoint on 127.0.0.1 and keys to sign tokens with."""

    def __init__(self) -> None:
        self.keys = [RSAKey.generate_key(2048, parameters={"kid": "k1"})]
        self.requests = 0
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.requests += 1
                body = json.dumps(KeySet(issuer.keys).as_dict(private=False)).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def token(self, key: RSAKey | None = None, **claims: Any) -> str:
        signer = key or self.keys[0]
        body = {"iss": self.url, "aud": AUDIENCE, "sub": "alice", "exp": time.time() + 300}
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode({"alg": "RS256", "kid": signer.kid}, body, signer)


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    running = Issuer()
    yield running
    running.server.shutdown()


def _verifier(issuer: Issuer) -> JwtVerifier:
    return JwtVerifier(issuer.url, AUDIENCE, JwksCache(f"{issuer.url}/.well-known/jwks.json"))


def _connect(token: str) -> dict[str, Any]:
    return {
        "type": "REQUEST",
        "methodArn": "arn:aws:execute-api:x",
        "queryStringParameters": {"token": token},
    }


def test_a_valid_token_gets_an_allow_policy_with_its_subject_and_the_jwks_is_fetched_once(
    issuer: Issuer,
) -> None:
    verifier = _verifier(issuer)

    first = authorize(_connect(issuer.token()), verifier)
    second = authorize(
        {"headers": {"Authorization": f"Bearer {issuer.token(sub='bob')}"}}, verifier
    )

    assert first["principalId"] == "alice"
    assert first["context"] == {"sub": "alice"}
    statement = first["policyDocument"]["Statement"][0]
    assert statement == {
        "Action": "execute-api:Invoke",
        "Effect": "Allow",
        "Resource": "arn:aws:execute-api:x",
    }
    assert second["principalId"] == "bob"
    assert issuer.requests == 1


def test_a_cognito_access_token_is_accepted_by_its_client_id(issuer: Issuer) -> None:
    token = issuer.token(aud=None, client_id=AUDIENCE)
    assert authorize(_connect(token), _verifier(issuer))["principalId"] == "alice"


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": time.time() - 3600},
        {"aud": "another-app"},
        {"iss": "https://elsewhere.example"},
        {"sub": None},
        {"exp": None},
        {"nbf": time.time() + 3600},
    ],
    ids=["expired", "audience", "issuer", "no-subject", "no-expiry", "not-yet-valid"],
)
def test_a_token_failing_a_claim_check_is_refused(issuer: Issuer, claims: dict[str, Any]) -> None:
    with pytest.raises(Unauthorized):
        authorize(_connect(issuer.token(**claims)), _verifier(issuer))


def test_a_token_signed_by_another_key_a_garbled_one_or_none_is_refused(issuer: Issuer) -> None:
    verifier = _verifier(issuer)
    stranger = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    good = issuer.token()
    for token in (issuer.token(key=stranger), good[:-4] + "AAAA", "not.a.jwt", ""):
        with pytest.raises(Unauthorized):
            authorize(_connect(token), verifier)
    with pytest.raises(Unauthorized):
        authorize({"headers": {}}, verifier)


def test_an_unknown_key_id_refetches_the_jwks_only_after_the_copy_is_old(issuer: Issuer) -> None:
    now = [0.0]
    verifier = JwtVerifier(
        issuer.url, AUDIENCE, JwksCache(f"{issuer.url}/jwks", clock=lambda: now[0])
    )
    authorize(_connect(issuer.token()), verifier)
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2"})
    issuer.keys.append(rotated)

    with pytest.raises(Unauthorized):  # the copy is fresh: no refetch for an unknown key
        authorize(_connect(issuer.token(key=rotated)), verifier)
    now[0] += 301
    assert authorize(_connect(issuer.token(key=rotated)), verifier)["principalId"] == "alice"
    assert issuer.requests == 2
