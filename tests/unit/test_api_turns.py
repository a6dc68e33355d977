"""Turn routes of the HTTP API: start, rate limit, launch failure, status, cancel, events."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest

from tests.support.api_client import ApiHarness, auth, make_api_harness
from turnkeep.api import ApiSettings
from turnkeep.events import turn_events, turn_view
from turnkeep.harness import ModelStepInput, model_step, resume_turn
from turnkeep.harness.state import frames_address, response_id
from turnkeep.providers.base import (
    ModelProvider,
    ModelRequest,
    RetryableModelError,
    StreamEvent,
    TextDelta,
)
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import Storage, open_storage


@dataclass
class DyingProvider(ModelProvider):
    """Streams a few text pieces, then the connection drops (a retryable error)."""

    pieces: tuple[str, ...] = ("Hello ", "wor")
    name: str = "dying"

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        for piece in self.pieces:
            yield TextDelta(piece)
        raise RetryableModelError("connection dropped mid-stream", code="stream_truncated")


@dataclass
class FakeClock:
    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _events(api: ApiHarness, sid: str, turn: str, **params: Any) -> dict[str, Any]:
    response = api.client.get(f"/sessions/{sid}/turns/{turn}/events", params=params, headers=auth())
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _round_died_mid_stream(api: ApiHarness) -> tuple[str, str]:
    """A new turn whose round 0 streamed "Hello wor" as frames, then died (retryably)."""
    sid = api.session()
    turn = api.start(sid, "hello there")
    api.runtime.deps.provider = DyingProvider()
    with pytest.raises(RetryableModelError):
        model_step(api.runtime.deps, ModelStepInput(session_id=sid, op_id=turn, round=0))
    return sid, turn


def _poll_all(api: ApiHarness, sid: str, turn: str, limit: int) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    cursor: int | None = None
    for _ in range(200):
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        page = _events(api, sid, turn, **params)
        seen.extend(page["events"])
        cursor = page["next_cursor"]
        if page["finished"]:
            return seen
    raise AssertionError("the turn never reported finished")


def test_start_turn_returns_202_and_launches_the_started_operation(
    paused_api: ApiHarness,
) -> None:
    api = paused_api
    sid = api.session()
    response = api.client.post(f"/sessions/{sid}/turns", json={"text": "hi"}, headers=auth())
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "running"
    assert api.launcher.launched == [(sid, body["turn_id"])]
    assert response.headers["Location"] == f"/sessions/{sid}/turns/{body['turn_id']}"
    status = api.client.get(f"/sessions/{sid}/turns/{body['turn_id']}", headers=auth()).json()
    assert status["status"] == "running"
    assert status["finished"] is False


def test_second_start_while_a_turn_runs_is_409(paused_api: ApiHarness) -> None:
    api = paused_api
    sid = api.session()
    api.start(sid, "first")
    before = api.snapshot(sid)
    response = api.client.post(f"/sessions/{sid}/turns", json={"text": "two"}, headers=auth())
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "turn_running"
    assert api.snapshot(sid) == before
    assert len(api.launcher.launched) == 1


def test_turn_status_reports_completed_with_usage_and_rounds(api: ApiHarness) -> None:
    sid = api.session()
    turn = api.start(sid, "remember we chose SQLite")
    status = api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()
    assert status["status"] == "completed"
    assert status["finished"] is True
    assert status["rounds"] == 2
    assert status["usage"]["output_tokens"] > 0


def test_unknown_turn_is_404(api: ApiHarness) -> None:
    sid = api.session()
    for suffix in ("", "/events", "/cancel"):
        method = "post" if suffix == "/cancel" else "get"
        response = api.client.request(
            method, f"/sessions/{sid}/turns/op-nope{suffix}", headers=auth()
        )
        assert response.status_code == 404
        assert response.json()["error"] == {"code": "not_found", "message": "turn not found"}


def test_turn_start_rate_limit_answers_429_with_retry_after() -> None:
    for api in make_api_harness(settings=ApiSettings(turn_start_limit=2)):
        clock = FakeClock()
        api.runtime.deps.clock = clock
        sid = api.session()
        api.start(sid, "one")
        api.start(sid, "two")
        before = api.snapshot(sid)
        refused = api.client.post(f"/sessions/{sid}/turns", json={"text": "3"}, headers=auth())
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert api.snapshot(sid)[1:] == before[1:]  # no turn recorded
        other = api.session()
        api.start(other, "another session has its own window")
        clock.now += 61
        api.start(sid, "a new window")


def test_failed_launch_ends_the_turn_as_failed_answers_503_and_frees_the_session(
    paused_api: ApiHarness,
) -> None:
    api = paused_api
    sid = api.session()
    api.launcher.fail_with = RuntimeError("state machine unreachable")
    response = api.client.post(f"/sessions/{sid}/turns", json={"text": "hi"}, headers=auth())
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "launch_failed"
    session = api.client.get(f"/sessions/{sid}", headers=auth()).json()
    assert session["turn"]["status"] == "failed"
    assert "could not be launched" in session["turn"]["error"]
    failed_turn = session["turn"]["turn_id"]
    status = api.client.get(f"/sessions/{sid}/turns/{failed_turn}", headers=auth()).json()
    assert status["status"] == "failed"
    api.launcher.fail_with = None
    api.start(sid, "again")


def test_model_outside_the_allow_list_is_422_and_starts_nothing(api: ApiHarness) -> None:
    sid = api.session()
    before = api.snapshot(sid)
    response = api.client.post(
        f"/sessions/{sid}/turns",
        json={"text": "hi", "model": "openai:https://attacker.example/v1#m?key=env:AWS_SECRET"},
        headers=auth(),
    )
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "model"
    assert api.snapshot(sid) == before
    ok = api.client.post(
        f"/sessions/{sid}/turns", json={"text": "hi", "model": "scripted"}, headers=auth()
    )
    assert ok.status_code == 202


def test_cancel_of_a_running_turn_is_202_and_the_next_step_aborts_it(
    paused_api: ApiHarness,
) -> None:
    api = paused_api
    sid = api.session()
    turn = api.start(sid, "hello")
    response = api.client.post(f"/sessions/{sid}/turns/{turn}/cancel", headers=auth())
    assert response.status_code == 202
    assert response.json() == {"turn_id": turn, "status": "cancelling", "cancel_requested": True}
    assert api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()["status"] == (
        "cancelling"
    )
    result = resume_turn(api.runtime.deps, sid, turn)
    assert result.status == "aborted"
    status = api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()
    assert status["status"] == "aborted"
    assert status["finished"] is True


def test_cancel_of_a_finished_turn_is_200_and_changes_nothing(api: ApiHarness) -> None:
    sid = api.session()
    turn = api.start(sid, "hello")
    before = api.snapshot(sid)
    response = api.client.post(f"/sessions/{sid}/turns/{turn}/cancel", headers=auth())
    assert response.status_code == 200
    assert response.json() == {"turn_id": turn, "status": "completed", "cancel_requested": False}
    assert api.snapshot(sid) == before


def test_events_stream_frames_of_the_running_round_then_the_entry_supersedes_them(
    paused_api: ApiHarness,
) -> None:
    api = paused_api
    sid, turn = _round_died_mid_stream(api)
    first = _events(api, sid, turn)
    kinds = [(e["kind"], e.get("role")) for e in first["events"]]
    assert kinds == [("entry", "user"), ("frame", None), ("frame", None)]
    assert "".join(e["text"] for e in first["events"][1:]) == "Hello wor"
    assert {e["response_id"] for e in first["events"][1:]} == {response_id(turn, 0)}
    assert first["finished"] is False
    assert first["status"] == "running"
    # Nothing new: the same cursor returns nothing and keeps the cursor.
    idle = _events(api, sid, turn, cursor=first["next_cursor"])
    assert idle["events"] == []
    assert idle["next_cursor"] == first["next_cursor"]
    # The redelivered step settles the streamed text; the turn then runs to its end.
    api.runtime.deps.provider = ScriptedProvider()
    assert resume_turn(api.runtime.deps, sid, turn).status == "completed"
    rest = _events(api, sid, turn, cursor=first["next_cursor"])
    assert rest["finished"] is True
    assert rest["status"] == "completed"
    assert all(e["kind"] == "entry" for e in rest["events"])
    settled = rest["events"][0]
    assert settled["response_id"] == response_id(turn, 0)
    assert settled["interrupted"] is True
    assert settled["parts"][0]["text"].startswith("Hello wor")
    seqs = [e["seq"] for e in first["events"] + rest["events"]]
    assert seqs == sorted(set(seqs))


def test_events_never_return_frames_of_an_already_settled_round(paused_api: ApiHarness) -> None:
    api = paused_api
    sid = api.session()
    turn = api.start(sid, 'call echo {"text": "ping"}')
    out = model_step(api.runtime.deps, ModelStepInput(session_id=sid, op_id=turn, round=0))
    assert out.next == "tools"
    storage = open_storage(api.runtime.storage_url, sid)
    try:  # the round's frames were retired with its settlement: its entry supersedes them
        assert storage.read_list(frames_address(turn, response_id(turn, 0))) == []
    finally:
        storage.close()
    page = _events(api, sid, turn)
    assert [e["kind"] for e in page["events"]] == ["entry", "entry"]
    assert page["events"][1]["response_id"] == response_id(turn, 0)
    assert page["events"][1]["parts"][0]["kind"] == "tool_call"
    assert page["finished"] is False


def test_polling_events_with_the_cursor_sees_every_event_once_in_order(api: ApiHarness) -> None:
    sid = api.session()
    turn = api.start(
        sid,
        'call calculator {"expression": "6*7"}\ncall echo {"text": "x"}\nthen\n'
        'call echo {"text": "second round"}',
    )
    whole = _events(api, sid, turn, limit=1000)
    assert whole["finished"] is True
    one_by_one = _poll_all(api, sid, turn, limit=1)
    assert [e["seq"] for e in one_by_one] == [e["seq"] for e in whole["events"]]
    # user, r0 (two calls), two results, r1 (one call), one result, r2 (the answer)
    assert len(whole["events"]) == 7
    # Another turn of the session does not leak into this turn's events.
    api.start(sid, "hello")
    assert _events(api, sid, turn, limit=1000)["events"] == whole["events"]


def test_finished_is_false_while_events_remain_behind_the_limit(api: ApiHarness) -> None:
    sid = api.session()
    turn = api.start(sid, "remember we chose SQLite")
    page = _events(api, sid, turn, limit=2)
    assert len(page["events"]) == 2
    assert page["finished"] is False
    rest = _events(api, sid, turn, cursor=page["next_cursor"], limit=100)
    assert rest["finished"] is True
    assert rest["events"]


class _SettlesAfterFrameRead:
    """A storage handle whose first frames read is followed by the round's settlement."""

    def __init__(self, inner: Storage, settle: Callable[[], None]) -> None:
        self._inner = inner
        self._settle: Callable[[], None] | None = settle

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def read_list(self, *args: Any, **kwargs: Any) -> Any:
        elements = self._inner.read_list(*args, **kwargs)
        if self._settle is not None:
            settle, self._settle = self._settle, None
            settle()
        return elements


def test_frames_read_just_before_their_round_settles_are_not_returned(
    paused_api: ApiHarness,
) -> None:
    api = paused_api
    sid, turn = _round_died_mid_stream(api)
    api.runtime.deps.provider = ScriptedProvider()

    def settle() -> None:  # the redelivered round-0 step settles the streamed text
        model_step(api.runtime.deps, ModelStepInput(session_id=sid, op_id=turn, round=0))

    inner = open_storage(api.runtime.storage_url, sid)
    try:
        racing = cast(Storage, _SettlesAfterFrameRead(inner, settle))
        page = turn_events(racing, api.runtime.envelopes.get(sid), turn, None, 100)
    finally:
        inner.close()
    assert [e.kind for e in page.events] == ["entry", "entry"]
    assert page.events[1].entry_id == response_id(turn, 0)
    assert page.events[1].interrupted is True


def test_cancel_racing_the_turns_end_answers_200_and_reports_no_cancel(
    paused_api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from turnkeep.api import turns as turn_routes

    api = paused_api
    sid = api.session()
    turn = api.start(sid, "hello")
    with open_storage(api.runtime.storage_url, sid) as storage:
        running_view = turn_view(storage, api.runtime.envelopes.get(sid), turn)
    resume_turn(api.runtime.deps, sid, turn)  # the turn ends between the read and the cancel
    monkeypatch.setattr(turn_routes, "turn_view", lambda *_args: running_view)
    response = api.client.post(f"/sessions/{sid}/turns/{turn}/cancel", headers=auth())
    assert response.status_code == 200, response.text
    assert response.json() == {"turn_id": turn, "status": "completed", "cancel_requested": False}


def test_a_turn_start_reads_the_callers_envelope_once_for_ownership_and_rate_limit(
    paused_api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = paused_api
    sid = api.session()
    envelopes = api.runtime.envelopes
    reads: list[str] = []
    real_owned, real_get = envelopes.get_for_owner, envelopes.get

    def counting_owned(owner_id: str, session_id: str) -> Any:
        reads.append(session_id)
        return real_owned(owner_id, session_id)

    def counting_get(session_id: str) -> Any:
        reads.append(session_id)
        return real_get(session_id)

    monkeypatch.setattr(envelopes, "get_for_owner", counting_owned)
    monkeypatch.setattr(envelopes, "get", counting_get)
    api.start(sid, "hello")
    # One read serves ownership and the rate limit; start_turn reads once more to claim.
    assert reads == [sid, sid]
    meta = cast(Any, envelopes.get(sid)).meta
    assert meta["turnRateWindowCount"] == 1


@dataclass
class _EndsAfterRecordRead:
    """A storage whose first result read misses: the turn ends right after that read."""

    inner: Storage
    end: Callable[[], object]
    ended: bool = False

    def get_value(self, address: Any) -> Any:
        found = self.inner.get_value(address)
        if not self.ended and found is None:
            self.ended = True
            self.end()
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_turn_status_read_while_the_turn_ends_is_its_record_not_404(
    paused_api: ApiHarness,
) -> None:
    api = paused_api
    sid = api.session()
    turn = api.start(sid, "hello")
    inner = open_storage(api.runtime.storage_url, sid)
    try:
        racing = _EndsAfterRecordRead(inner, lambda: resume_turn(api.runtime.deps, sid, turn))
        view = turn_view(cast(Storage, racing), api.runtime.envelopes.get(sid), turn)
    finally:
        inner.close()
    assert racing.ended
    assert view.finished is True
    assert view.status == "completed"


def test_cancel_of_a_turn_whose_completion_is_being_committed_is_200_and_it_completes(
    paused_api: ApiHarness,
) -> None:
    api = paused_api
    sid = api.session()
    turn = api.start(sid, "hello")
    # finish_turn's completion fence landed; its terminal commit has not yet.
    api.runtime.envelopes.update_worker_meta(sid, {"turnFinishing": turn})

    response = api.client.post(f"/sessions/{sid}/turns/{turn}/cancel", headers=auth())

    assert response.status_code == 200, response.text
    assert response.json() == {"turn_id": turn, "status": "running", "cancel_requested": False}
    assert resume_turn(api.runtime.deps, sid, turn).status == "completed"
