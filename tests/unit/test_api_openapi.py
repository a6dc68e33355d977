"""The OpenAPI schema documents the error statuses the routes really answer."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api_client import ApiHarness, auth

HUGE_NUMBER_BODY = '{"text": ' + "9" * 5000 + "}"


def _operations(paused_api: ApiHarness) -> list[tuple[str, str, dict[str, Any]]]:
    schema = paused_api.client.get("/openapi.json").json()
    return [
        (path, method, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    ]


def test_every_operation_with_a_json_body_documents_400(paused_api: ApiHarness) -> None:
    with_body = [(p, m, op) for p, m, op in _operations(paused_api) if "requestBody" in op]

    assert {(p, m) for p, m, _ in with_body} == {
        ("/sessions", "post"),
        ("/sessions/{session_id}/meta", "put"),
        ("/sessions/{session_id}/turns", "post"),
        ("/sessions/{session_id}/turns/{turn_id}/approvals/{call_id}", "post"),
    }
    assert [(p, m) for p, m, op in with_body if "400" not in op["responses"]] == []


def test_every_operation_documents_405(paused_api: ApiHarness) -> None:
    assert [(p, m) for p, m, op in _operations(paused_api) if "405" not in op["responses"]] == []


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/sessions"), ("PUT", "/sessions/{sid}/meta"), ("POST", "/sessions/{sid}/turns")],
)
def test_each_body_route_really_answers_400_for_a_body_the_parser_gives_up_on(
    paused_api: ApiHarness, method: str, path: str
) -> None:
    sid = paused_api.session()

    response = paused_api.client.request(
        method,
        path.format(sid=sid),
        content=HUGE_NUMBER_BODY,
        headers={**auth(), "Content-Type": "application/json"},
    )

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_body"


def test_a_route_answers_405_for_a_method_it_does_not_have(paused_api: ApiHarness) -> None:
    sid = paused_api.session()

    response = paused_api.client.patch(f"/sessions/{sid}/turns", headers=auth())

    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
