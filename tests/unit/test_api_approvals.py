"""The approval routes over the real app (memory storage, turns run inline by the launcher)."""

from __future__ import annotations

from typing import Any

from tests.support.api_client import OTHER, ApiHarness, auth


def _gated_session(api: ApiHarness, policy: str = "echo") -> str:
    sid = api.session()
    response = api.client.put(
        f"/sessions/{sid}/meta", json={"toolApproval": policy}, headers=auth()
    )
    assert response.status_code == 200, response.text
    return sid


def _paused_turn(api: ApiHarness) -> tuple[str, str, str]:
    sid = _gated_session(api)
    turn = api.start(sid, 'call echo {"text": "hello"}')
    view = api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()
    assert view["status"] == "awaiting_approval", view
    pending = api.client.get("/approvals", headers=auth()).json()["approvals"]
    assert len(pending) == 1
    return sid, turn, pending[0]["call_id"]


def _decide(
    api: ApiHarness, sid: str, turn: str, call: str, body: dict[str, Any], *, user: str = "alice"
) -> Any:
    return api.client.post(
        f"/sessions/{sid}/turns/{turn}/approvals/{call}", json=body, headers=auth(user)
    )


def _events(api: ApiHarness, sid: str, turn: str) -> list[dict[str, Any]]:
    page = api.client.get(f"/sessions/{sid}/turns/{turn}/events", headers=auth()).json()
    events: list[dict[str, Any]] = page["events"]
    return events


def test_a_paused_turn_is_listed_and_shows_an_approval_requested_event(api: ApiHarness) -> None:
    sid, turn, call = _paused_turn(api)

    [pending] = api.client.get("/approvals", headers=auth()).json()["approvals"]
    requested = [e for e in _events(api, sid, turn) if e["kind"] == "approval_requested"]

    assert pending["tool"] == "echo"
    assert pending["arguments"] == {"text": "hello"}
    assert pending["session_id"] == sid
    assert pending["expires_at"] - pending["requested_at"] == 86_400_000
    assert [(e["call_id"], e["tool"], e["arguments"]) for e in requested] == [
        (call, "echo", {"text": "hello"})
    ]
    assert api.client.get("/approvals", headers=auth(OTHER)).json()["approvals"] == []


def test_approving_runs_the_tool_and_the_turn_completes(api: ApiHarness) -> None:
    sid, turn, call = _paused_turn(api)

    response = _decide(api, sid, turn, call, {"decision": "approve"})

    assert response.status_code == 202, response.text
    view = api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()
    assert view["status"] == "completed"
    kinds = [e["kind"] for e in _events(api, sid, turn)]
    assert "approval_decided" in kinds
    assert api.client.get("/approvals", headers=auth()).json()["approvals"] == []


def test_an_edit_that_breaks_the_schema_is_422_and_the_request_stays(api: ApiHarness) -> None:
    sid, turn, call = _paused_turn(api)

    bad = _decide(api, sid, turn, call, {"decision": "edit", "arguments": {"text": 5}})
    good = _decide(api, sid, turn, call, {"decision": "edit", "arguments": {"text": "edited"}})

    assert bad.status_code == 422, bad.text
    assert bad.json()["error"]["field"] == "arguments"
    assert good.status_code == 202, good.text
    results = [e for e in _events(api, sid, turn) if e.get("role") == "tool"]
    assert "edited" in results[0]["parts"][0]["content"]


def test_a_second_decision_is_409_and_unknown_calls_or_users_are_404(api: ApiHarness) -> None:
    sid, turn, call = _paused_turn(api)

    unknown = _decide(api, sid, turn, "call_nope", {"decision": "approve"})
    other = _decide(api, sid, turn, call, {"decision": "approve"}, user=OTHER)
    first = _decide(api, sid, turn, call, {"decision": "deny", "reason": "no"})
    second = _decide(api, sid, turn, call, {"decision": "approve"})

    assert unknown.status_code == 404
    assert other.status_code == 404
    assert first.status_code == 202
    assert second.status_code == 409, second.text


def test_a_bad_decision_body_is_422(api: ApiHarness) -> None:
    sid, turn, call = _paused_turn(api)

    response = _decide(api, sid, turn, call, {"decision": "maybe"})

    assert response.status_code == 422


def test_while_waiting_start_and_delete_are_409_and_cancel_aborts(api: ApiHarness) -> None:
    sid, turn, call = _paused_turn(api)

    start = api.client.post(f"/sessions/{sid}/turns", json={"text": "hi"}, headers=auth())
    delete = api.client.delete(f"/sessions/{sid}", headers=auth())
    cancel = api.client.post(f"/sessions/{sid}/turns/{turn}/cancel", headers=auth())
    late = _decide(api, sid, turn, call, {"decision": "approve"})

    assert start.status_code == 409, start.text
    assert "approval" in start.json()["error"]["message"]
    assert delete.status_code == 409
    assert cancel.status_code == 202
    assert cancel.json()["status"] == "aborted"
    assert late.status_code == 409
    assert api.client.get("/approvals", headers=auth()).json()["approvals"] == []
    assert api.client.delete(f"/sessions/{sid}", headers=auth()).status_code == 204
