"""Routing edges: no redirect is ever built from the request's Host, and identity comes first."""

from __future__ import annotations

import pytest

from tests.support.api_client import ApiHarness, auth

EVIL = {"Host": "evil.example"}


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "POST"])
def test_a_trailing_slash_with_a_spoofed_host_and_no_auth_is_401_and_never_a_redirect(
    api: ApiHarness, method: str
) -> None:
    sid = api.session()

    response = api.client.request(method, f"/sessions/{sid}/", headers=EVIL, follow_redirects=False)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert "location" not in response.headers


@pytest.mark.parametrize(
    "path", ["/sessions/{sid}/", "/sessions/", "/sessions/{sid}/turns/", "/sessions/{sid}/notes/"]
)
def test_a_trailing_slash_is_a_clear_404_without_a_location(api: ApiHarness, path: str) -> None:
    sid = api.session()

    response = api.client.delete(
        path.format(sid=sid), headers={**auth(), **EVIL}, follow_redirects=False
    )

    assert response.status_code == 404
    assert "location" not in response.headers
    assert "trailing slash" in response.json()["error"]["message"]
    assert api.client.get(f"/sessions/{sid}", headers=auth()).status_code == 200  # not deleted


def test_an_unknown_route_or_method_without_auth_is_401_first(api: ApiHarness) -> None:
    sid = api.session()

    assert api.client.get("/nowhere").status_code == 401
    assert api.client.patch(f"/sessions/{sid}", json={}).status_code == 401
    assert api.client.patch(f"/sessions/{sid}", json={}, headers=auth()).status_code == 405


def test_the_openapi_schema_stays_public(api: ApiHarness) -> None:
    assert api.client.get("/openapi.json").status_code == 200
