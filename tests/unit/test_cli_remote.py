"""The remote chat client: frame/entry de-duplication, error answers, bounded polling."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from turnkeep import cli
from turnkeep.cli import remote
from turnkeep.cli.event_renderer import TurnEventRenderer
from turnkeep.cli.printer import StreamPrinter
from turnkeep.cli.remote import RemoteChat

RID = "op-1:r0"


def _frame(seq: int, text: str, rid: str = RID) -> dict[str, Any]:
    return {"seq": seq, "kind": "frame", "response_id": rid, "round": 0, "text": text}


def _assistant(seq: int, text: str, rid: str = RID, **more: Any) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"kind": "text", "text": text}] if text else []
    parts += more.pop("calls", [])
    return {
        "seq": seq,
        "kind": "entry",
        "entry_id": rid,
        "response_id": rid,
        "role": "assistant",
        "parts": parts,
        "interrupted": more.pop("interrupted", False),
    }


def _render(*events: dict[str, Any]) -> str:
    out = io.StringIO()
    renderer = TurnEventRenderer(StreamPrinter(out))
    for event in events:
        renderer.on_event(event)
    renderer.finish()
    return out.getvalue()


def test_settled_entry_after_frames_prints_only_the_text_the_frames_did_not_show() -> None:
    text = _render(_frame(2, "Here is "), _frame(3, "what I"), _assistant(5, "Here is what I know"))

    assert text == "assistant> Here is what I know\n"


def test_settled_entry_without_frames_prints_its_whole_text_once() -> None:
    assert _render(_assistant(5, "Noted.")) == "assistant> Noted.\n"


def test_settled_entry_that_only_repeats_the_streamed_text_prints_nothing_more() -> None:
    assert _render(_frame(2, "Noted."), _assistant(5, "Noted.")) == "assistant> Noted.\n"


def test_frames_of_a_settled_round_and_repeated_seqs_are_not_printed_again() -> None:
    text = _render(_frame(2, "Hi"), _frame(2, "Hi"), _assistant(5, "Hi there"), _frame(6, "Hi"))

    assert text == "assistant> Hi there\n"


def test_settled_text_that_does_not_extend_the_stream_is_printed_whole_after_a_notice() -> None:
    text = _render(_frame(2, "Draft answ"), _assistant(5, "Final answer"))

    assert text == (
        "assistant> Draft answ\n"
        "[the streamed reply was revised; the settled reply:]\n"
        "assistant> Final answer\n"
    )


def test_each_round_streams_into_its_own_reply_and_tool_lines_follow_their_entry() -> None:
    call = {"kind": "tool_call", "id": "c1", "name": "calculator", "arguments": '{"e": "6*7"}'}
    result = {
        "seq": 8,
        "kind": "entry",
        "entry_id": "op-1:r0:c1",
        "role": "tool",
        "parts": [
            {"kind": "tool_result", "name": "calculator", "content": "42\n43\n44", "is_error": True}
        ],
    }

    text = _render(
        _frame(2, "Let me"),
        _assistant(5, "Let me check", calls=[call]),
        result,
        _frame(10, "It is", rid="op-1:r1"),
        _assistant(12, "It is 42", rid="op-1:r1"),
    )

    assert text == (
        "assistant> Let me check\n"
        '  -> tool call calculator {"e": "6*7"}\n'
        "  <- calculator [error] 42 (+2 more lines)\n"
        "assistant> It is 42\n"
    )


def test_an_interrupted_reply_says_so_and_a_user_entry_is_not_echoed() -> None:
    user = {"seq": 1, "kind": "entry", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}

    text = _render(user, _frame(2, "Par"), _assistant(4, "Part", interrupted=True))

    assert text == "assistant> Part\n[this reply was interrupted]\n"


# -- the client over a scripted HTTP transport -------------------------------------------------

Handler = Callable[[httpx.Request], httpx.Response]


def _error(status: int, code: str, message: str, **headers: str) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"code": code, "message": message}}, headers=headers
    )


class FakeApi:
    """Answers the routes the client uses; `turn_answers` decides each turn start."""

    def __init__(self, pages: list[dict[str, Any]] | None = None) -> None:
        self.turn_answers: list[httpx.Response] = []
        self.pages = pages or []
        self.requests: list[httpx.Request] = []
        self.view: dict[str, Any] = {
            "status": "completed",
            "rounds": 1,
            "usage": {"input_tokens": 3},
        }

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if request.method == "POST" and path == "/sessions":
            return httpx.Response(201, json={"session_id": "s-1"})
        if request.method == "GET" and path == "/sessions/s-1/notes":
            return httpx.Response(200, json={"notes": "we chose SQLite", "bytes": 15})
        if request.method == "POST" and path == "/sessions/s-1/turns":
            return self.turn_answers.pop(0)
        if path == "/sessions/s-1/turns/op-1/events":
            page = self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]
            return httpx.Response(200, json={"turn_id": "op-1", "status": "running", **page})
        if path == "/sessions/s-1/turns/op-1":
            return httpx.Response(200, json=self.view)
        return _error(404, "not_found", "route not found")


def _run_chat(api: Handler, lines: str, *argv: str) -> tuple[int, str, str]:
    client = httpx.Client(base_url="http://api.test", transport=httpx.MockTransport(api))
    out, err = io.StringIO(), io.StringIO()
    args = cli.build_parser().parse_args(["chat", "--url", "http://api.test", *argv])

    def open_client(url: str, *, token: str | None, user: str) -> httpx.Client:
        client.headers["Authorization"] = f"Bearer {token if token else 'dev-' + user}"
        return client

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(remote, "open_client", open_client)
        patch.delenv(cli.TOKEN_ENV, raising=False)
        code = cli.run_remote_chat(args, io.StringIO(lines), out, err)
    return code, out.getvalue(), err.getvalue()


def test_a_running_turn_and_the_rate_limit_are_reported_and_the_chat_goes_on() -> None:
    api = FakeApi([{"events": [_assistant(5, "Noted.")], "next_cursor": 5, "finished": True}])
    api.turn_answers = [
        _error(409, "turn_running", "session 's-1' runs turn 'op-0'; one turn at a time"),
        _error(429, "rate_limited", "at most 10 turn starts per 60 s", **{"Retry-After": "17"}),
        httpx.Response(202, json={"turn_id": "op-1", "status": "running"}),
    ]

    code, out, err = _run_chat(api, "one\ntwo\nthree\n/notes\n", "--user", "alice")

    assert code == 0, err
    assert "[API error 409 turn_running: session 's-1' runs turn 'op-0'; one turn" in out
    assert "[API error 429 rate_limited: at most 10 turn starts per 60 s (retry after 17 s)]" in out
    assert "assistant> Noted.\n[turn op-1: completed, 1 model round, 3 in / 0 out tokens]\n" in out
    assert "you> we chose SQLite\n" in out
    assert api.requests[0].headers["Authorization"] == "Bearer dev-alice"


def test_a_token_is_sent_as_the_bearer_instead_of_the_dev_token() -> None:
    api = FakeApi()

    code, _, _ = _run_chat(api, "/quit\n", "--token", "eyJ.real.jwt")

    assert code == 0
    assert api.requests[0].headers["Authorization"] == "Bearer eyJ.real.jwt"


def test_a_gateway_error_without_the_api_error_shape_is_still_named() -> None:
    def gateway(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"message": "Unauthorized"})

    code, out, err = _run_chat(gateway, "hello\n")

    assert code == 1
    assert "the session could not be opened: API error 401 http_401: Unauthorized" in err
    assert out == ""


def test_a_connection_lost_mid_chat_ends_it_with_a_clear_message_and_a_non_zero_code() -> None:
    api = FakeApi()

    def dropping(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/turns"):
            raise httpx.ConnectError("connection refused", request=request)
        return api(request)

    code, _, err = _run_chat(dropping, "hello\n/notes\n")

    assert code == 1
    assert "turnkeep chat: cannot reach the API at http://api.test" in err
    assert "connection refused" in err


def _chat_with_clock(api: FakeApi, wall_s: float) -> tuple[RemoteChat, io.StringIO, list[float]]:
    out = io.StringIO()
    now = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    client = httpx.Client(base_url="http://api.test", transport=httpx.MockTransport(api))
    chat = RemoteChat(
        client, StreamPrinter(out), turn_wall_s=wall_s, sleep=sleep, clock=lambda: now[0]
    )
    chat.open_session(None)
    api.turn_answers = [httpx.Response(202, json={"turn_id": "op-1", "status": "running"})]
    return chat, out, sleeps


def test_polling_backs_off_from_50_ms_to_at_most_500_ms_and_resets_when_events_arrive() -> None:
    empty = {"events": [], "next_cursor": 1, "finished": False}
    pages = [empty] * 6 + [
        {"events": [_frame(2, "Hi")], "next_cursor": 2, "finished": False},
        {"events": [], "next_cursor": 2, "finished": False},
        {"events": [_assistant(4, "Hi")], "next_cursor": 4, "finished": True},
    ]
    api = FakeApi(pages)
    chat, out, sleeps = _chat_with_clock(api, 60)

    assert chat.turn("hello") == "completed"

    assert sleeps == [0.05, 0.1, 0.2, 0.4, 0.5, 0.5, 0.05, 0.05]
    cursors = [r.url.params.get("cursor") for r in api.requests if r.url.path.endswith("events")]
    assert cursors == ["0"] + ["1"] * 6 + ["2", "2"]  # each poll sends the last next_cursor
    assert out.getvalue().startswith("assistant> Hi\n[turn op-1:")


def test_a_turn_that_outlives_the_wall_time_is_left_with_a_message() -> None:
    api = FakeApi([{"events": [_frame(2, "Thinking")], "next_cursor": 2, "finished": False}])
    chat, out, sleeps = _chat_with_clock(api, 2.0)

    assert chat.turn("hello") is None

    assert sum(sleeps) == pytest.approx(2.0)  # waited the wall time, never beyond it
    assert out.getvalue() == (
        "assistant> Thinking\n"
        "[turn op-1 did not finish within 2 s; stopped waiting, it may still run on the server]\n"
    )


@pytest.mark.parametrize(
    "url", ["ftp://host", "127.0.0.1:8787", "http://", "http://h/?q=1", "http://h/#f"]
)
def test_a_url_that_is_not_an_http_base_url_is_refused_naming_it(url: str) -> None:
    with pytest.raises(ValueError, match="--url must") as info:
        remote.check_url(url)
    assert repr(url) in str(info.value)


def test_token_without_url_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["chat", "--token", "t"])

    assert info.value.code == 2
    assert "--token needs --url" in capsys.readouterr().err


def test_an_api_error_body_of_another_shape_is_shown_with_its_size_not_cut_silently() -> None:
    response = httpx.Response(502, text="x" * 1000)

    error = remote._api_error(response)

    assert str(error) == "API error 502 http_502: " + "x" * 300 + "... (+700 more characters)"


def test_error_bodies_are_read_from_json() -> None:
    body = json.dumps({"error": {"code": "not_found", "message": "session not found"}})
    error = remote._api_error(httpx.Response(404, content=body))

    assert (error.status, error.code, error.message) == (404, "not_found", "session not found")


def test_an_error_while_following_a_turn_names_the_turn_and_the_chat_goes_on() -> None:
    api = FakeApi()
    api.turn_answers = [httpx.Response(202, json={"turn_id": "op-1", "status": "running"})]

    def unavailable(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            return _error(503, "unavailable", "the storage is unavailable", **{"Retry-After": "1"})
        return api(request)

    code, out, _ = _run_chat(unavailable, "hello\n/notes\n")

    assert code == 0
    assert (
        "[stopped following turn op-1: API error 503 unavailable: the storage is unavailable"
        " (retry after 1 s)]\n" in out
    )
    assert "you> we chose SQLite\n" in out


def test_a_url_that_is_not_the_api_is_named_instead_of_crashing() -> None:
    def web_page(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>hello</html>", headers={"content-type": "text/html"})

    code, _, err = _run_chat(web_page, "hello\n", "--session", "s-1")

    assert code == 1
    assert "GET /sessions/s-1 answered 'text/html', not a JSON object" in err


@pytest.mark.parametrize(
    "ws_url", ["https://h/live", "h/live", "ws://", "wss://h/live#f", "http://127.0.0.1:8787"]
)
def test_a_ws_url_that_is_not_a_websocket_url_is_a_usage_error_naming_it(
    ws_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["chat", "--url", "http://127.0.0.1:1", "--ws-url", ws_url])

    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--ws-url must" in err
    assert repr(ws_url) in err


def test_ws_url_without_url_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["chat", "--ws-url", "wss://h/live"])

    assert info.value.code == 2
    assert "--ws-url needs --url" in capsys.readouterr().err


def test_a_bad_ws_url_in_the_environment_is_a_one_line_error_with_exit_status_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TURNKEEP_WS_URL", "https://h/live")

    code = cli.main(["chat", "--url", "http://127.0.0.1:1"])

    assert code == 2
    assert capsys.readouterr().err == (
        "turnkeep chat: TURNKEEP_WS_URL must be a wss:// or ws:// URL with a host, "
        "got 'https://h/live'\n"
    )


def test_a_server_whose_get_live_says_it_cannot_stream_is_polled_without_a_stream_request() -> None:
    api = FakeApi([{"events": [_assistant(5, "Noted.")], "next_cursor": 5, "finished": True}])
    api.turn_answers = [httpx.Response(202, json={"turn_id": "op-1", "status": "running"})]

    def lambda_host(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/live":  # the Lambda host: no stream route, no WebSocket
            return httpx.Response(200, json={"websocket_url": None, "stream": False})
        return api(request)  # records every other request, the stream route's included

    code, out, err = _run_chat(lambda_host, "one\n")

    assert code == 0, err
    assert "assistant> Noted.\n[turn op-1: completed" in out
    paths = [r.url.path for r in api.requests]
    assert [p for p in paths if p.endswith("/stream")] == []
    assert "/sessions/s-1/turns/op-1/events" in paths


def test_a_typed_turns_result_is_printed_as_json_before_its_status_line() -> None:
    api = FakeApi([{"events": [], "next_cursor": 5, "finished": True}])
    api.turn_answers = [httpx.Response(202, json={"turn_id": "op-1", "status": "running"})]
    api.view = {**api.view, "output": {"label": "bug", "tags": ["ui"]}}

    code, out, err = _run_chat(api, "classify it\n", "--user", "alice")

    assert code == 0, err
    assert (
        'result> {\n  "label": "bug",\n  "tags": [\n    "ui"\n  ]\n}\n'
        "[turn op-1: completed, 1 model round, 3 in / 0 out tokens]\n"
    ) in out


def test_a_turn_start_over_the_daily_budget_is_one_line_with_the_reset_time() -> None:
    api = FakeApi([{"events": [_assistant(5, "Noted.")], "next_cursor": 5, "finished": True}])
    message = (
        "your daily cost budget of $1.000000 is spent ($1.000412 today); "
        "it resets at 2026-12-03T00:00:00Z"
    )
    api.turn_answers = [
        _error(429, "budget_exceeded", message, **{"Retry-After": "3600"}),
        httpx.Response(202, json={"turn_id": "op-1", "status": "running"}),
    ]

    code, out, err = _run_chat(api, "one\ntwo\n", "--user", "alice")

    assert code == 0, err
    line = f"[API error 429 budget_exceeded: {message} (retry after 3600 s)]\n"
    assert line in out
    assert out.count("budget_exceeded") == 1
