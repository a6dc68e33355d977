"""A singleton header sent twice (Authorization, Content-Length, Host, Content-Type) is refused
with 400 `duplicate_header` before authentication or the body is judged; nothing is written."""

from __future__ import annotations

import pytest

from tests.support.api_client import ApiHarness


@pytest.mark.parametrize(
    ("name", "first", "second"),
    [
        ("authorization", "Bearer dev-alice", "Bearer dev-bob"),
        ("authorization", "Bearer dev-alice", "Bearer dev-alice"),
        ("content-type", "application/json", "text/plain"),
    ],
)
def test_a_singleton_header_sent_twice_is_a_400_naming_it(
    api: ApiHarness, name: str, first: str, second: str
) -> None:
    headers = [("authorization", "Bearer dev-alice"), (name, first), (name, second)]
    if name == "authorization":
        headers = headers[1:]

    answer = api.client.post("/sessions", json={"title": "x"}, headers=headers)

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "duplicate_header"
    assert answer.json()["error"]["field"] == name
    listed = api.client.get("/sessions", headers={"Authorization": "Bearer dev-alice"})
    assert listed.json()["sessions"] == []  # nothing was created


def test_one_of_each_singleton_header_is_served(api: ApiHarness) -> None:
    answer = api.client.post(
        "/sessions", json={"title": "x"}, headers={"Authorization": "Bearer dev-alice"}
    )

    assert answer.status_code == 201


def test_every_operation_documents_the_400_a_duplicate_header_gets(api: ApiHarness) -> None:
    paths = api.client.get("/openapi.json").json()["paths"]

    missing = [
        (p, m)
        for p, item in paths.items()
        for m, op in item.items()
        if "400" not in op["responses"]
    ]

    assert missing == []
