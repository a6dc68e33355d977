"""Child sessions belong to their parent: `GET /sessions` leaves sub-agent child sessions out
unless `children=true`, `GET /sessions/{child}` still serves its owner, and deleting the
parent deletes its children with all they stored (docs/api.md, docs/agent.md "Sub-agents")."""

from __future__ import annotations

import json

from tests.support.api_client import OTHER, ApiHarness, auth
from turnkeep import Agent

WRITER = Agent(name="writer", instructions="You write changelogs.")
TRIAGE = Agent(name="triage", agents=[WRITER])


def _parent_with_child(api: ApiHarness) -> tuple[str, str]:
    """A session whose one turn called the writer sub-agent; (parent id, child id)."""
    api.runtime.deps.agent = TRIAGE
    sid = api.session()
    turn = api.start(sid, f"call writer {json.dumps({'input': 'write v2 notes'})}")
    view = api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()
    assert view["status"] == "completed", view
    child = next(
        e.session_id
        for e in api.runtime.envelopes.list_for_owner("alice")
        if e.parent_session_id == sid
    )
    return sid, child


def test_listing_sessions_leaves_sub_agent_child_sessions_out_by_default(
    api: ApiHarness,
) -> None:
    sid, child = _parent_with_child(api)
    other = api.session()

    listed = api.client.get("/sessions", headers=auth())
    newest = api.client.get("/sessions", params={"order": "newest", "limit": 1}, headers=auth())

    assert listed.status_code == 200, listed.text
    assert [s["session_id"] for s in listed.json()["sessions"]] == [sid, other]
    assert [s["parent_session_id"] for s in listed.json()["sessions"]] == [None, None]
    assert [s["session_id"] for s in newest.json()["sessions"]] == [other]
    assert child.startswith("sub-")


def test_listing_with_children_true_shows_each_child_with_its_parent(api: ApiHarness) -> None:
    sid, child = _parent_with_child(api)

    body = api.client.get("/sessions", params={"children": "true"}, headers=auth()).json()

    assert {s["session_id"]: s["parent_session_id"] for s in body["sessions"]} == {
        sid: None,
        child: sid,
    }


def test_the_owner_still_gets_a_child_session_by_its_id_and_no_one_else_does(
    api: ApiHarness,
) -> None:
    sid, child = _parent_with_child(api)

    mine = api.client.get(f"/sessions/{child}", headers=auth())
    theirs = api.client.get(f"/sessions/{child}", headers=auth(OTHER))
    transcript = api.client.get(f"/sessions/{child}/transcript", headers=auth())

    assert mine.status_code == 200, mine.text
    assert mine.json()["parent_session_id"] == sid
    assert mine.json()["turn"]["status"] == "completed"
    assert theirs.status_code == 404
    assert transcript.status_code == 200, transcript.text
    assert "write v2 notes" in json.dumps(transcript.json()["entries"])


def test_deleting_the_parent_deletes_its_child_session_and_what_it_stored(
    api: ApiHarness,
) -> None:
    sid, child = _parent_with_child(api)
    kept = api.session()

    deleted = api.client.delete(f"/sessions/{sid}", headers=auth())

    assert deleted.status_code == 204, deleted.text
    assert api.client.get(f"/sessions/{child}", headers=auth()).status_code == 404
    assert api.runtime.envelopes.get(child) is None
    with api.runtime.deps.open_storage(child) as storage:
        assert storage.get_stats().message_count == 0
    listed = api.client.get("/sessions", params={"children": "true"}, headers=auth()).json()
    assert [s["session_id"] for s in listed["sessions"]] == [kept]
