"""Where no process streams the turns (the Lambda host, any app without the in-process hub),
`GET .../stream` answers 501 `stream_unavailable` after the usual authentication."""

from __future__ import annotations

from tests.support.api_client import ApiHarness


def test_the_stream_route_without_a_hub_answers_501_naming_the_alternatives(
    api: ApiHarness,
) -> None:
    sid = api.session()
    turn = api.start(sid, "hello")

    answer = api.client.get(
        f"/sessions/{sid}/turns/{turn}/stream", headers={"Authorization": "Bearer dev-alice"}
    )
    anonymous = api.client.get(f"/sessions/{sid}/turns/{turn}/stream")

    assert answer.status_code == 501
    error = answer.json()["error"]
    assert error["code"] == "stream_unavailable"
    assert "WebSocket" in error["message"]
    assert "/events" in error["message"]
    assert anonymous.status_code == 401
