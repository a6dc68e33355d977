"""The WebSocket `$connect` authorizer verifies the HTTP API's JWT of the `Authorization`
header: signature against the issuer's JWKS (fetched once per container, again only for an
unknown key), issuer, audience or client id, expiry, a subject; or it redeems a single-use
ticket (DynamoDB under moto, the table as template.yaml declares it); anything else — a JWT in
the URL included — is refused with `Unauthorized` (401). The JWKS is served by a real HTTP server
on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from moto import mock_aws

from tests.support.aws_template import create_table
from turnkeep.live import authorizer
from turnkeep.live.authorizer import JwksCache, JwtVerifier, Unauthorized
from turnkeep.live.tickets import TICKET_TTL_S, TicketStore

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


@pytest.fixture(autouse=True)
def tickets(monkeypatch: pytest.MonkeyPatch) -> Iterator[TicketStore]:
    for name, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("dynamodb")
        create_table(client, "sessions")
        yield TicketStore(client, "sessions")


def authorize(event: dict[str, Any], verifier: JwtVerifier) -> dict[str, Any]:
    """`authorizer.authorize` with this test's ticket store."""
    return authorizer.authorize(event, verifier, TicketStore(boto3.client("dynamodb"), "sessions"))


def _connect(token: str) -> dict[str, Any]:
    return {
        "type": "REQUEST",
        "methodArn": "arn:aws:execute-api:x",
        "headers": {"Authorization": f"Bearer {token}"},
    }


def _with_ticket(ticket: str) -> dict[str, Any]:
    return {"type": "REQUEST", "queryStringParameters": {"ticket": ticket}, "headers": {}}


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


def test_a_jwt_in_the_url_is_refused_even_when_valid(issuer: Issuer) -> None:
    verifier = _verifier(issuer)
    token = issuer.token()

    with pytest.raises(Unauthorized, match="Unauthorized") as refused:
        authorize({"queryStringParameters": {"token": token}}, verifier)
    with pytest.raises(Unauthorized):  # not even beside a valid header
        authorize({**_connect(token), "queryStringParameters": {"token": token}}, verifier)

    assert "URL" in refused.value.reason
    assert issuer.requests == 0  # refused before any verification


def test_a_ticket_connects_as_its_user_once_whoever_presents_it(
    issuer: Issuer, tickets: TicketStore
) -> None:
    verifier = _verifier(issuer)
    ticket = tickets.issue("alice").value

    # Bob's header does not matter: the connection is the ticket's user's.
    policy = authorize({**_connect(issuer.token(sub="bob")), **_with_ticket(ticket)}, verifier)
    with pytest.raises(Unauthorized, match="Unauthorized") as again:
        authorize(_with_ticket(ticket), verifier)

    assert policy["principalId"] == "alice"
    assert policy["context"] == {"sub": "alice"}
    assert "already used" in again.value.reason


def test_a_ticket_presented_after_its_lifetime_is_refused(issuer: Issuer) -> None:
    now = [1_000_000.0]
    store = TicketStore(boto3.client("dynamodb"), "sessions", clock=lambda: now[0])
    late, in_time = store.issue("alice").value, store.issue("alice").value
    now[0] += TICKET_TTL_S - 1
    assert store.redeem(in_time) == "alice"
    now[0] += 1

    with pytest.raises(Unauthorized):
        authorizer.authorize(_with_ticket(late), _verifier(issuer), store)


@pytest.mark.parametrize("ticket", ["", "short", "x" * 43 + "=", "a b" * 15, "A" * 43])
def test_a_malformed_or_unknown_ticket_is_refused(issuer: Issuer, ticket: str) -> None:
    with pytest.raises(Unauthorized):
        authorize(_with_ticket(ticket), _verifier(issuer))
