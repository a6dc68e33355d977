"""`GET /sessions` paging: oldest first by default (unchanged), newest first on request, pages
resumed after an opaque cursor, bad paging input a 422 naming the parameter."""

from __future__ import annotations

import pytest

from tests.support.api_client import OTHER, ApiHarness, auth


def _ids(paused_api: ApiHarness, **params: object) -> tuple[list[str], str | None]:
    response = paused_api.client.get("/sessions", params=params, headers=auth())
    assert response.status_code == 200, response.text
    body = response.json()
    return [s["session_id"] for s in body["sessions"]], body["next_cursor"]


def test_without_paging_parameters_every_session_is_listed_oldest_first(
    paused_api: ApiHarness,
) -> None:
    created = [paused_api.session(f"s-{i:02d}") for i in range(5)]
    ids, cursor = _ids(paused_api)
    assert ids == created
    assert cursor is None


def test_newest_first_pages_resume_after_the_cursor_without_gaps_or_repeats(
    paused_api: ApiHarness,
) -> None:
    created = [paused_api.session(f"s-{i:02d}") for i in range(7)]
    paused_api.session("s-other", user=OTHER)
    seen: list[str] = []
    pages = 0
    cursor: str | None = None
    while True:
        params: dict[str, object] = {"order": "newest", "limit": 3}
        if cursor is not None:
            params["cursor"] = cursor
        ids, cursor = _ids(paused_api, **params)
        seen += ids
        pages += 1
        if cursor is None:
            break
    assert seen == list(reversed(created))
    assert pages == 3


def test_a_session_deleted_between_pages_does_not_shift_the_next_page(
    paused_api: ApiHarness,
) -> None:
    created = [paused_api.session(f"s-{i:02d}") for i in range(6)]
    first, cursor = _ids(paused_api, order="oldest", limit=2)
    assert first == created[:2]
    assert paused_api.client.delete(f"/sessions/{created[0]}", headers=auth()).status_code == 204
    second, _ = _ids(paused_api, order="oldest", limit=2, cursor=cursor)
    assert second == created[2:4]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"order": "sideways"}, "order"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
    ],
)
def test_bad_paging_input_is_a_422_naming_the_parameter(
    paused_api: ApiHarness, params: dict[str, object], field: str
) -> None:
    response = paused_api.client.get("/sessions", params=params, headers=auth())
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field
