"""A turn's timeline route and view: bars from what the turn stores, older untimed entries
counted, a missing or foreign turn a clear 404 (docs/api.md, docs/console.md "Timeline")."""

from __future__ import annotations

from tests.support.api_client import OTHER, ApiHarness, auth
from turnkeep.events.timeline import entry_bars
from turnkeep.harness.transcript import entry_data, tool_message
from turnkeep.providers.base import Message, TextPart, ToolResultPart
from turnkeep.storage import Entry


def test_the_timeline_route_gives_a_finished_turns_rounds_and_tool_calls(api: ApiHarness) -> None:
    sid = api.session()
    turn = api.start(sid, 'call echo {"text": "hi"}')

    response = api.client.get(f"/sessions/{sid}/turns/{turn}/timeline", headers=auth())

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "completed"
    assert [b["kind"] for b in body["bars"]] == ["round", "tool", "round"]
    assert body["bars"][1]["label"] == "echo"
    assert body["bars"][0]["output_tokens"] > 0
    assert body["started_at"] <= body["bars"][0]["start"] <= body["finished_at"]


def test_the_timeline_of_a_missing_or_anothers_turn_is_a_clear_404(api: ApiHarness) -> None:
    sid = api.session()
    turn = api.start(sid, "hello")

    missing = api.client.get(f"/sessions/{sid}/turns/op-nope/timeline", headers=auth())
    foreign = api.client.get(f"/sessions/{sid}/turns/{turn}/timeline", headers=auth(OTHER))

    assert missing.status_code == 404
    assert missing.json()["error"] == {"code": "not_found", "message": "turn not found"}
    assert foreign.status_code == 404
    assert foreign.json()["error"]["message"] == "session not found"


def _entry(data: object, type_: str = "message") -> Entry:
    return Entry(id="op:r0", parent_id=None, type=type_, data=data, seq=3)  # type: ignore[arg-type]


def test_a_round_or_call_stored_before_timing_was_kept_has_no_bar_and_is_counted() -> None:
    reply = entry_data(Message("assistant", (TextPart("hi"),)), op="op", round=0)
    result = entry_data(
        tool_message([ToolResultPart("c1", "echo", "hi", False)]), op="op", round=0, call_id="c1"
    )

    assert entry_bars(_entry(reply)) == ([], 1)
    assert entry_bars(_entry(result)) == ([], 1)


def test_a_tool_bar_keeps_its_error_and_an_end_before_its_start_is_clamped() -> None:
    result = entry_data(
        tool_message([ToolResultPart("c1", "echo", "Error: no", True)]),
        op="op",
        round=0,
        call_id="c1",
        timing={"started_at": 10.0, "ended_at": 9.0},
    )

    (bar,), untimed = entry_bars(_entry(result))

    assert untimed == 0
    assert (bar.kind, bar.is_error, bar.start, bar.end) == ("tool", True, 10.0, 10.0)


def test_the_timeline_of_a_later_turn_reads_only_from_its_own_user_message_on(
    api: ApiHarness,
) -> None:
    sid = api.session()
    first = api.start(sid, 'call echo {"text": "one"}')
    second = api.start(sid, 'call echo {"text": "two"}')

    one = api.client.get(f"/sessions/{sid}/turns/{first}/timeline", headers=auth()).json()
    two = api.client.get(f"/sessions/{sid}/turns/{second}/timeline", headers=auth()).json()

    assert [b["kind"] for b in one["bars"]] == [b["kind"] for b in two["bars"]]
    assert one["finished_at"] <= two["started_at"]
    assert all(b["start"] >= two["started_at"] for b in two["bars"])
