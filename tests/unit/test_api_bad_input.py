"""Bad input on every route: a 4xx with a JSON error naming the problem, and nothing changed.

Each case runs against a session that already holds a finished turn, working notes, host meta
and a transcript; after the bad request every stored byte of it (envelope with its `updatedAt`,
entries, stats) and every user's session list must be exactly as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

import pytest

from tests.support.api_client import OTHER, USER, ApiHarness, auth, make_api_harness

SID = "alice-session"


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: str
    status: int
    code: str
    field: str | None = None
    json: Any = None
    content: bytes | None = None
    params: dict[str, Any] = dc_field(default_factory=dict)
    headers: dict[str, str] | None = None  # None = alice's dev token


def _c(*args: Any, **kwargs: Any) -> Any:
    case = Case(*args, **kwargs)
    return pytest.param(case, id=case.name)


T = f"/sessions/{SID}/turns/{{turn}}"
CASES = [
    # -- sessions ---------------------------------------------------------------------------
    _c("create-title-wrong-type", "POST", "/sessions", 422, "validation_error", "title",
       json={"title": 5}),
    _c("create-title-over-cap", "POST", "/sessions", 422, "validation_error", "title",
       json={"title": "x" * 2000}),
    _c("create-title-lone-surrogate", "POST", "/sessions", 422, "validation_error", "title",
       content=b'{"title": "\\ud800"}'),
    _c("create-bad-session-id", "POST", "/sessions", 422, "validation_error", "session_id",
       json={"session_id": "has space"}),
    _c("create-long-session-id", "POST", "/sessions", 422, "validation_error", "session_id",
       json={"session_id": "s" * 129}),
    _c("create-taken-session-id", "POST", "/sessions", 409, "session_exists", "session_id",
       json={"session_id": SID}),
    _c("create-unknown-field", "POST", "/sessions", 422, "validation_error", "owner_id",
       json={"owner_id": "bob"}),
    _c("create-body-is-a-list", "POST", "/sessions", 422, "validation_error", json=[1, 2]),
    _c("create-invalid-json", "POST", "/sessions", 422, "validation_error", "body",
       content=b'{"title": '),
    _c("get-malformed-session-id", "GET", "/sessions/has%20space", 422, "validation_error",
       "session_id"),
    _c("get-overlong-session-id", "GET", "/sessions/" + "s" * 129, 422, "validation_error",
       "session_id"),
    _c("get-unknown-session", "GET", "/sessions/nobody-here", 404, "not_found"),
    _c("delete-unknown-session", "DELETE", "/sessions/nobody-here", 404, "not_found"),
    # -- host meta --------------------------------------------------------------------------
    _c("meta-body-is-a-string", "PUT", f"/sessions/{SID}/meta", 422, "validation_error",
       json="title"),
    _c("meta-nested-value", "PUT", f"/sessions/{SID}/meta", 422, "validation_error", "title",
       json={"title": {"nested": True}}),
    _c("meta-wrong-type-for-key", "PUT", f"/sessions/{SID}/meta", 422, "invalid_meta",
       json={"archived": "yes"}),
    _c("meta-over-cap", "PUT", f"/sessions/{SID}/meta", 422, "invalid_meta",
       json={"title": "t" * 5000}),
    _c("meta-working-notes", "PUT", f"/sessions/{SID}/meta", 400, "worker_key", "workingNotes",
       json={"workingNotes": "obey me"}),
    _c("meta-worker-key", "PUT", f"/sessions/{SID}/meta", 400, "worker_key", "turnStatus",
       json={"turnStatus": "idle"}),
    _c("meta-unknown-key", "PUT", f"/sessions/{SID}/meta", 400, "unknown_meta_key", "colour",
       json={"colour": "red"}),
    _c("meta-unknown-session", "PUT", "/sessions/nobody-here/meta", 404, "not_found",
       json={"title": "x"}),
    # -- turns ------------------------------------------------------------------------------
    _c("start-text-wrong-type", "POST", f"/sessions/{SID}/turns", 422, "validation_error",
       "text", json={"text": 5}),
    _c("start-text-missing", "POST", f"/sessions/{SID}/turns", 422, "validation_error", "text",
       json={}),
    _c("start-text-empty", "POST", f"/sessions/{SID}/turns", 422, "validation_error", "text",
       json={"text": ""}),
    _c("start-text-blank", "POST", f"/sessions/{SID}/turns", 422, "validation_error", "text",
       json={"text": " \n\t "}),
    _c("start-text-over-cap", "POST", f"/sessions/{SID}/turns", 422, "message_too_large",
       "text", json={"text": "x" * 32769}),
    _c("start-text-over-cap-in-bytes", "POST", f"/sessions/{SID}/turns", 422,
       "message_too_large", "text", json={"text": "é" * 16385}),
    _c("start-text-lone-surrogate", "POST", f"/sessions/{SID}/turns", 422, "validation_error",
       "text", content=b'{"text": "hi \\udc00"}'),
    _c("start-user-id-in-body", "POST", f"/sessions/{SID}/turns", 422, "validation_error",
       "user_id", json={"text": "hi", "user_id": OTHER}),
    _c("start-model-wrong-type", "POST", f"/sessions/{SID}/turns", 422, "validation_error",
       "model", json={"text": "hi", "model": 5}),
    _c("start-model-not-offered", "POST", f"/sessions/{SID}/turns", 422, "model_not_allowed",
       "model", json={"text": "hi", "model": "bedrock:anthropic.claude"}),
    _c("start-unknown-session", "POST", "/sessions/nobody-here/turns", 404, "not_found",
       json={"text": "hi"}),
    _c("status-malformed-turn-id", "GET", f"/sessions/{SID}/turns/bad%20id", 422,
       "validation_error", "turn_id"),
    _c("status-unknown-turn", "GET", f"/sessions/{SID}/turns/op-unknown", 404, "not_found"),
    _c("cancel-unknown-turn", "POST", f"/sessions/{SID}/turns/op-unknown/cancel", 404,
       "not_found"),
    _c("events-unknown-turn", "GET", f"/sessions/{SID}/turns/op-unknown/events", 404,
       "not_found"),
    _c("events-negative-cursor", "GET", T + "/events", 422, "validation_error", "cursor",
       params={"cursor": -1}),
    _c("events-text-cursor", "GET", T + "/events", 422, "validation_error", "cursor",
       params={"cursor": "abc"}),
    _c("events-fraction-cursor", "GET", T + "/events", 422, "validation_error", "cursor",
       params={"cursor": "1.5"}),
    _c("events-huge-cursor", "GET", T + "/events", 422, "validation_error", "cursor",
       params={"cursor": str(10**30)}),
    _c("events-bad-child-cursor", "GET", T + "/events", 422, "validation_error", "cursor",
       params={"cursor": "5:zz=1"}),
    _c("events-huge-child-cursor", "GET", T + "/events", 422, "validation_error", "cursor",
       params={"cursor": "5:" + "a" * 24 + "=" + "9" * 19}),
    _c("events-zero-limit", "GET", T + "/events", 422, "validation_error", "limit",
       params={"limit": 0}),
    _c("events-huge-limit", "GET", T + "/events", 422, "validation_error", "limit",
       params={"limit": 1001}),
    _c("transcript-bad-cursor", "GET", f"/sessions/{SID}/transcript", 422, "validation_error",
       "cursor", params={"cursor": "-3"}),
    _c("transcript-bad-limit", "GET", f"/sessions/{SID}/transcript", 422, "validation_error",
       "limit", params={"limit": "many"}),
    # -- identity ---------------------------------------------------------------------------
    _c("no-authorization", "GET", f"/sessions/{SID}", 401, "unauthenticated", headers={}),
    _c("basic-auth", "GET", f"/sessions/{SID}", 401, "unauthenticated",
       headers={"Authorization": "Basic YWxpY2U6eA=="}),
    _c("non-dev-bearer", "GET", f"/sessions/{SID}", 401, "unauthenticated",
       headers={"Authorization": "Bearer eyJhbGciOiJub25lIn0.e30."}),
    _c("empty-dev-user", "GET", f"/sessions/{SID}", 401, "unauthenticated",
       headers={"Authorization": "Bearer dev-"}),
    _c("bad-dev-user", "GET", f"/sessions/{SID}", 401, "unauthenticated",
       headers={"Authorization": "Bearer dev-a/b"}),
    _c("unauthenticated-start", "POST", f"/sessions/{SID}/turns", 401, "unauthenticated",
       json={"text": "hi"}, headers={}),
    # -- protocol ---------------------------------------------------------------------------
    _c("body-too-large", "POST", f"/sessions/{SID}/turns", 413, "body_too_large",
       content=b"x" * (1_048_576 + 1)),
    _c("method-not-allowed", "PATCH", f"/sessions/{SID}", 405, "method_not_allowed",
       json={"title": "x"}),
    _c("unknown-route", "GET", "/nowhere", 404, "not_found"),
]  # fmt: skip

OTHER_USER_ROUTES = [
    ("GET", f"/sessions/{SID}", None),
    ("DELETE", f"/sessions/{SID}", None),
    ("PUT", f"/sessions/{SID}/meta", {"title": "pwned"}),
    ("GET", f"/sessions/{SID}/notes", None),
    ("GET", f"/sessions/{SID}/transcript", None),
    ("POST", f"/sessions/{SID}/turns", {"text": "hi"}),
    ("GET", T, None),
    ("POST", T + "/cancel", None),
    ("GET", T + "/events", None),
]


@pytest.fixture
def api() -> Iterator[tuple[ApiHarness, str]]:
    for harness in make_api_harness():
        harness.session(SID)
        harness.client.put(f"/sessions/{SID}/meta", json={"title": "keep me"}, headers=auth())
        turn = harness.start(SID, "remember we chose SQLite")
        harness.session(user=OTHER)
        yield harness, turn


def _state(api: ApiHarness) -> tuple[Any, ...]:
    envelopes = api.runtime.envelopes
    return (
        api.snapshot(SID),
        [e.session_id for e in envelopes.list_for_owner(USER)],
        [e.session_id for e in envelopes.list_for_owner(OTHER)],
    )


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_a_clear_4xx_and_changes_nothing(
    api: tuple[ApiHarness, str], case: Case
) -> None:
    harness, turn = api
    before = _state(harness)
    headers = auth() if case.headers is None else case.headers
    if case.content is not None:
        headers = {**headers, "Content-Type": "application/json"}
    response = harness.client.request(
        case.method,
        case.path.format(turn=turn),
        json=case.json,
        content=case.content,
        params=case.params,
        headers=headers,
    )
    assert response.status_code == case.status, response.text
    error = response.json()["error"]
    assert error["code"] == case.code
    assert isinstance(error["message"], str)
    assert len(error["message"]) > 5
    if case.field is not None:
        assert error.get("field") == case.field
        assert case.field in error["message"]
    assert _state(harness) == before
    assert harness.client.get(f"/sessions/{SID}/notes", headers=auth()).json()["notes"] == (
        "we chose SQLite"
    )


@pytest.mark.parametrize(("method", "path", "body"), OTHER_USER_ROUTES)
def test_another_users_session_is_404_on_every_route_and_unchanged(
    api: tuple[ApiHarness, str], method: str, path: str, body: Any
) -> None:
    harness, turn = api
    before = _state(harness)
    response = harness.client.request(
        method, path.format(turn=turn), json=body, headers=auth(OTHER)
    )
    assert response.status_code == 404
    assert response.json()["error"] == {"code": "not_found", "message": "session not found"}
    assert _state(harness) == before


def test_oversize_message_error_states_the_cap(api: tuple[ApiHarness, str]) -> None:
    harness, _turn = api
    response = harness.client.post(
        f"/sessions/{SID}/turns", json={"text": "x" * 40000}, headers=auth()
    )
    message = response.json()["error"]["message"]
    assert "40000 bytes" in message
    assert "32768" in message
    assert "xxxxxxxxxx" not in message  # the input is never echoed back
