"""Session routes of the HTTP API: create/list/get/delete, host meta PUT, notes, transcript."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.api_client import OTHER, USER, ApiHarness, auth
from turnkeep.envelope.caps import WORKING_NOTES_MAX_BYTES
from turnkeep.storage import (
    append_list,
    ephemeral_scope,
    open_repository,
    open_storage,
    value_list,
)

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_create_session_returns_201_with_the_callers_envelope_view(api: ApiHarness) -> None:
    response = api.client.post("/sessions", json={"title": "Trip"}, headers=auth())
    assert response.status_code == 201
    body = response.json()
    assert body["meta"] == {"title": "Trip"}
    assert body["turn"]["status"] == "idle"
    assert body["has_working_notes"] is False
    stored = api.runtime.envelopes.get(body["session_id"])
    assert stored is not None
    assert stored.owner_id == USER


def test_client_chosen_session_id_is_kept_and_a_taken_id_is_409(api: ApiHarness) -> None:
    assert api.session("my-session.1") == "my-session.1"
    again = api.client.post("/sessions", json={"session_id": "my-session.1"}, headers=auth(OTHER))
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "session_exists"
    envelope = api.runtime.envelopes.get("my-session.1")
    assert envelope is not None
    assert envelope.owner_id == USER


def test_list_sessions_returns_only_the_callers_sessions(api: ApiHarness) -> None:
    mine = {api.session(), api.session()}
    api.session(user=OTHER)
    listed = api.client.get("/sessions", headers=auth()).json()["sessions"]
    assert {s["session_id"] for s in listed} == mine


def test_get_session_of_another_user_is_404_like_a_missing_one(api: ApiHarness) -> None:
    sid = api.session()
    foreign = api.client.get(f"/sessions/{sid}", headers=auth(OTHER))
    missing = api.client.get("/sessions/no-such-session", headers=auth())
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()


def test_put_meta_replaces_the_full_host_set_and_absent_keys_are_cleared(api: ApiHarness) -> None:
    sid = api.session()
    first = api.client.put(
        f"/sessions/{sid}/meta", json={"title": "A", "archived": False}, headers=auth()
    )
    assert first.status_code == 200
    assert first.json()["meta"] == {"title": "A", "archived": False}
    second = api.client.put(
        f"/sessions/{sid}/meta", json={"reasoningEffort": "low", "title": None}, headers=auth()
    )
    assert second.json()["meta"] == {"reasoningEffort": "low"}


def test_put_meta_never_touches_the_working_notes(api: ApiHarness) -> None:
    sid = api.session()
    api.start(sid, "remember we chose SQLite")
    api.client.put(f"/sessions/{sid}/meta", json={"title": "B"}, headers=auth())
    notes = api.client.get(f"/sessions/{sid}/notes", headers=auth()).json()
    assert notes["notes"] == "we chose SQLite"


@pytest.mark.parametrize(
    ("key", "code"),
    [
        ("workingNotes", "worker_key"),
        ("turnStatus", "worker_key"),
        ("usage", "worker_key"),
        ("colour", "unknown_meta_key"),
    ],
)
def test_put_meta_with_a_key_the_host_does_not_own_is_400_naming_it(
    api: ApiHarness, key: str, code: str
) -> None:
    sid = api.session()
    api.start(sid, "remember we chose SQLite")
    api.client.put(f"/sessions/{sid}/meta", json={"title": "keep"}, headers=auth())
    before = api.snapshot(sid)
    response = api.client.put(
        f"/sessions/{sid}/meta", json={"title": "new", key: "x"}, headers=auth()
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == code
    assert error["field"] == key
    assert key in error["message"]
    assert api.snapshot(sid) == before


def test_put_meta_with_a_bad_value_is_422_naming_the_key(api: ApiHarness) -> None:
    sid = api.session()
    before = api.snapshot(sid)
    response = api.client.put(
        f"/sessions/{sid}/meta", json={"reasoningEffort": "extreme"}, headers=auth()
    )
    assert response.status_code == 422
    assert "reasoningEffort" in response.json()["error"]["message"]
    assert api.snapshot(sid) == before


def test_put_meta_with_a_selected_model_the_server_does_not_offer_is_422_and_keeps_turns_working(
    api: ApiHarness,
) -> None:
    sid = api.session()
    before = api.snapshot(sid)

    refused = api.client.put(
        f"/sessions/{sid}/meta", json={"selectedModel": "openai:gpt-x"}, headers=auth()
    )

    assert refused.status_code == 422
    error = refused.json()["error"]
    assert (error["code"], error["field"]) == ("model_not_allowed", "selectedModel")
    assert error["message"].startswith(
        "selectedModel: 'openai:gpt-x' is not offered by this server; allowed: scripted"
    )
    assert api.snapshot(sid) == before
    started = api.client.post(f"/sessions/{sid}/turns", json={"text": "hi"}, headers=auth())
    assert started.status_code == 202, started.text
    accepted = api.client.put(
        f"/sessions/{sid}/meta", json={"selectedModel": "scripted"}, headers=auth()
    )
    assert accepted.status_code == 200, accepted.text


def test_notes_endpoint_shows_what_the_notes_tools_wrote(api: ApiHarness) -> None:
    sid = api.session()
    empty = api.client.get(f"/sessions/{sid}/notes", headers=auth()).json()
    assert empty == {"notes": None, "bytes": 0, "max_bytes": WORKING_NOTES_MAX_BYTES}
    api.start(sid, "remember we chose SQLite")
    notes = api.client.get(f"/sessions/{sid}/notes", headers=auth()).json()
    assert notes == {
        "notes": "we chose SQLite",
        "bytes": len("we chose SQLite"),
        "max_bytes": WORKING_NOTES_MAX_BYTES,
    }


def test_notes_endpoint_is_read_only(api: ApiHarness) -> None:
    sid = api.session()
    for method in ("put", "post", "delete"):
        response = api.client.request(
            method, f"/sessions/{sid}/notes", json={"notes": "x"}, headers=auth()
        )
        assert response.status_code == 405
        assert response.json()["error"]["code"] == "method_not_allowed"


def test_delete_removes_the_envelope_and_all_storage_including_scoped_progress(
    api: ApiHarness,
) -> None:
    sid = api.session()
    api.start(sid, "remember we chose SQLite")
    # Progress left in an operation scope that was never retired (storage never infers orphans).
    orphan = value_list("turn.frames", "orphan:r0", ephemeral_scope("orphan"))
    storage = open_storage(api.runtime.storage_url, sid)
    try:
        storage.commit([append_list(orphan, {"d": [{"k": "t", "x": "left over"}]})])
        assert storage.read_list(orphan)
        assert storage.scan_entries()
    finally:
        storage.close()
    response = api.client.delete(f"/sessions/{sid}", headers=auth())
    assert response.status_code == 204
    assert api.runtime.envelopes.get(sid) is None
    assert sid not in open_repository(api.runtime.storage_url).list_sessions()
    storage = open_storage(api.runtime.storage_url, sid)
    try:
        assert storage.scan_entries() == []
        assert storage.read_list(orphan) == []
    finally:
        storage.close()
    assert api.client.get(f"/sessions/{sid}", headers=auth()).status_code == 404


def test_delete_is_refused_with_409_while_a_turn_runs(paused_api: ApiHarness) -> None:
    api = paused_api
    sid = api.session()
    api.start(sid, "hello")
    before = api.snapshot(sid)
    response = api.client.delete(f"/sessions/{sid}", headers=auth())
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "turn_running"
    assert api.snapshot(sid) == before


def test_a_delete_in_progress_blocks_turn_starts(api: ApiHarness) -> None:
    sid = api.session()
    api.runtime.envelopes.update_worker_meta(
        sid, {"turnStatus": "running", "turnRunId": "__deleting__"}
    )
    response = api.client.post(f"/sessions/{sid}/turns", json={"text": "hi"}, headers=auth())
    assert response.status_code == 409
    assert "deleted" in response.json()["error"]["message"]
    # ...and a repeated DELETE finishes the job.
    assert api.client.delete(f"/sessions/{sid}", headers=auth()).status_code == 204


def test_transcript_pages_by_cursor_without_gaps_or_repeats(api: ApiHarness) -> None:
    sid = api.session()
    api.start(sid, "remember we chose SQLite")
    api.start(sid, "what do you remember?")
    whole = api.client.get(f"/sessions/{sid}/transcript", headers=auth()).json()
    assert whole["has_more"] is False
    seen: list[int] = []
    cursor = None
    for _ in range(50):
        params = {"limit": 2} if cursor is None else {"limit": 2, "cursor": cursor}
        page = api.client.get(f"/sessions/{sid}/transcript", params=params, headers=auth()).json()
        seen.extend(e["seq"] for e in page["entries"])
        cursor = page["next_cursor"]
        if not page["has_more"]:
            break
    assert seen == [e["seq"] for e in whole["entries"]]
    assert seen == sorted(set(seen))
    texts = [p.get("text") for e in whole["entries"] for p in e["parts"]]
    assert "what do you remember?" in texts


def test_openapi_schema_is_served_and_lists_every_route(api: ApiHarness) -> None:
    schema = api.client.get("/openapi.json").json()
    paths = schema["paths"]
    assert set(paths) >= {
        "/sessions",
        "/sessions/{session_id}",
        "/sessions/{session_id}/meta",
        "/sessions/{session_id}/notes",
        "/sessions/{session_id}/transcript",
        "/sessions/{session_id}/turns",
        "/sessions/{session_id}/turns/{turn_id}",
        "/sessions/{session_id}/turns/{turn_id}/cancel",
        "/sessions/{session_id}/turns/{turn_id}/events",
    }
    assert "delete" in paths["/sessions/{session_id}"]


def test_the_session_views_turn_has_the_fields_docs_api_md_names(api: ApiHarness) -> None:
    row = next(
        line
        for line in API_DOC.read_text().splitlines()
        if line.startswith("| `GET /sessions/{id}` |")
    )
    documented = re.search(r"`turn` summary `\{([^}]*)\}`", row)
    assert documented is not None, row
    sid = api.session()
    api.start(sid, "hello")

    turn = api.client.get(f"/sessions/{sid}", headers=auth()).json()["turn"]

    assert list(turn) == [name.strip() for name in documented.group(1).split(",")]
    assert turn["turn_id"]
