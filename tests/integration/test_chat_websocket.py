"""`turnkeep chat --url` against the deployed stack's shape: the stack of template.yaml under
moto (the real step handlers run by moto's Step Functions interpreter, pushing through boto3's
`apigatewaymanagementapi` client) behind a stand-in for API Gateway on 127.0.0.1
(tests/support/ws_gateway.py: the HTTP API's JWT check and Lambda, the WebSocket API's identity
sources as template.yaml declares them, its real `$connect` authorizer and `routes` handler,
`PostToConnection` written onto the socket). The chat is the real CLI in a subprocess with a
real JWT; it finds the WebSocket at `GET /live` (the API function's TURNKEEP_LIVE_URL, as the
template sets it). The polling reference is a chat against an API without that route."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from joserfc.jwk import RSAKey

from tests.support.state_machine import TABLE
from tests.support.ws_gateway import Gateway
from turnkeep.aws_lambda import container
from turnkeep.cli import ws
from turnkeep.harness import StartTurnInput, start_turn

USER = "user-ws"
TURN = 'call echo {"text": "ping"}\n/quit\n'
CHAT_TIMEOUT_S = 90


def _chat(gateway: Gateway, session: str, *extra: str, stdin: str = TURN) -> str:
    """The chat's output for one turn; it must exit 0 with nothing on stderr."""
    script = Path(sys.executable).with_name("turnkeep")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "turnkeep.cli"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
    env["TURNKEEP_API_TOKEN"] = gateway.token(USER)
    done = subprocess.run(
        [*command, "chat", "--url", gateway.url, "--session", session, *extra],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHAT_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def _polled(gateway: Gateway, session: str, *extra: str, stdin: str = TURN) -> str:
    """The output of a chat that polls: the API it talks to has no `GET /live` (an older one),
    so it tries the stream route (501 on Lambda) and then pages the events."""
    gateway.without_live_route = True
    try:
        return _chat(gateway, session, *extra, stdin=stdin)
    finally:
        gateway.without_live_route = False


def _turn_shown(out: str) -> str:
    """What the chat printed of the turn: without its session line, the turn id elided."""
    lines = [line for line in out.splitlines() if not line.startswith("turnkeep chat: session")]
    return re.sub(r"\[turn [^:\]]+:", "[turn T:", "\n".join(lines))


def _notices(out: str) -> list[str]:
    """The chat's lines about the WebSocket (after the prompt they interrupt)."""
    return [line[line.index("[") :] for line in out.splitlines() if "WebSocket" in line]


def _free_port() -> int:
    with socket.socket() as sock:  # a port nothing listens on any more
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _connections() -> list[str]:
    """The keys of every live-connection item of the table (subscriptions and their index)."""
    items = boto3.client("dynamodb").scan(TableName=TABLE)["Items"]
    return [
        f"{i['pk']['S']} {i['sk']['S']}"
        for i in items
        if i["pk"]["S"].startswith("LIVECONN#") or i["sk"]["S"].startswith("LIVE#")
    ]


def test_a_turn_followed_over_the_websocket_it_found_prints_what_polling_prints_and_polls_nothing(
    gateway: Gateway,
) -> None:
    over_socket = _chat(gateway, "s-ws")
    socket_paths = list(gateway.paths)
    pushed = gateway.messages()
    gateway.paths.clear()
    polled = _polled(gateway, "s-poll")

    assert f"live over {gateway.ws_url}" in over_socket
    assert "  -> tool call echo " in over_socket
    assert "Tool echo returned: ping" in over_socket
    assert ": completed, 2 model rounds, " in over_socket
    assert "polling" not in over_socket
    assert _turn_shown(over_socket) == _turn_shown(polled)
    # The socket carried the turn, live text included; the HTTP API only started and ended it.
    assert pushed[0]["event"] == "status"
    assert pushed[-1]["event"] == "end"
    assert any(m["event"] in ("delta", "frame") for m in pushed)
    assert not [p for p in socket_paths if p.endswith(("/events", "/stream"))]
    assert "/live" in socket_paths
    assert any(p.endswith("/events") for p in gateway.paths)  # the other chat did poll
    assert _connections() == []  # the chat closed its connection: $disconnect removed it


def test_a_websocket_that_refuses_the_connection_leaves_the_turn_to_polling_with_one_line(
    gateway: Gateway,
) -> None:
    refused_url = f"ws://127.0.0.1:{_free_port()}/live"

    out = _chat(gateway, "s-refused", "--ws-url", refused_url)
    polled = _polled(gateway, "s-poll")

    [notice] = _notices(out)
    assert notice.startswith(f"[the WebSocket at {refused_url} cannot be opened: ")
    assert notice.endswith("; polling]")
    assert _turn_shown(out.replace(notice + "\n", "")) == _turn_shown(polled)


def test_a_websocket_that_breaks_mid_turn_is_resumed_by_polling_from_its_last_event(
    gateway: Gateway,
) -> None:
    gateway.close_after = 3  # status, then two events: the rest comes from the events page

    out = _chat(gateway, "s-broken")
    gateway.close_after = None
    polled = _polled(gateway, "s-poll")

    [notice] = _notices(out)
    assert re.fullmatch(
        r"\[the WebSocket broke \(the connection was closed \(1011 going away\)\); "
        r"polling from event \d+\]",
        notice,
    ), notice
    assert _turn_shown(out.replace(notice + "\n", "")) == _turn_shown(polled)


def test_a_call_that_waits_for_approval_is_asked_about_and_the_turn_stays_on_the_socket(
    gateway: Gateway,
) -> None:
    answered = 'call echo {"text": "ping"}\ny\n/quit\n'

    out = _chat(gateway, "s-ws-ok", "--require-approval", "echo", stdin=answered)
    socket_paths = list(gateway.paths)
    pushed = gateway.messages()
    polled = _polled(gateway, "s-poll-ok", "--require-approval", "echo", stdin=answered)

    asked = '  ?? approval needed: tool call echo {"text": "ping"}'
    assert asked in out
    assert out.index('  -> tool call echo {"text": "ping"}') < out.index(asked)
    assert "Tool echo returned: ping" in out
    assert ": completed, 2 model rounds, " in out
    assert _notices(out) == []
    assert _turn_shown(out) == _turn_shown(polled)
    # The socket carried the turn past the decision to its end; nothing was polled.
    assert not [p for p in socket_paths if p.endswith(("/events", "/stream"))]
    assert any(p.endswith("/approvals/call-1") or "/approvals/" in p for p in socket_paths)
    assert [m["event"] for m in pushed].count("end") == 1
    assert pushed[-1]["event"] == "end"


def test_chat_url_never_requests_the_stream_route_the_lambda_cannot_answer(
    gateway: Gateway, capfd: pytest.CaptureFixture[str]
) -> None:
    refused_stage = f"{gateway.ws_url.rsplit('/', 1)[0]}/nostage"

    found = _chat(gateway, "s-found", stdin=TURN.replace("/quit", TURN.rstrip("\n")))
    unopened = _chat(gateway, "s-unopened", "--ws-url", refused_stage)
    metrics = capfd.readouterr().out

    assert found.count(": completed, 2 model rounds, ") == 2
    [notice] = _notices(unopened)
    assert notice == (
        f"[the WebSocket at {refused_stage} cannot be opened: the handshake was answered 403 "
        "(forbidden: is it the stack's WebSocketUrl?); polling]"
    )
    assert not [p for p in gateway.paths if p.endswith("/stream")]
    assert '"ApiRequests"' in metrics
    assert "ApiServerErrors" not in metrics


def test_a_token_the_issuer_did_not_sign_is_refused_at_the_handshake_and_records_nothing(
    gateway: Gateway,
) -> None:
    stranger = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    forged = gateway.token(USER, key=stranger)
    expired = gateway.token(USER, exp=1)

    for token in (forged, expired, None):
        authorization = f"Bearer {token}" if token is not None else None
        with (
            pytest.raises(ws.SocketUnavailable, match=r"answered 401 \(the token was refused\)"),
            ws.open_socket(gateway.ws_url, authorization),
        ):
            pass

    assert gateway.refused == 3
    assert gateway.users == {}
    assert _connections() == []
    with ws.open_socket(gateway.ws_url, f"Bearer {gateway.token(USER)}"):
        pass
    assert list(gateway.users.values()) == [USER]


def test_a_subscribe_whose_connection_is_gone_before_the_answer_ends_quietly_recording_nothing(
    gateway: Gateway,
) -> None:
    deps = container.runtime().deps
    deps.envelopes.create("s-gone", USER)
    start_turn(
        deps, StartTurnInput(session_id="s-gone", op_id="op-gone-01", user_id=USER, text="hi")
    )
    gateway.users["gone"] = USER  # authorized at $connect, closed before its subscribe's answer
    body = json.dumps({"action": "subscribe", "session_id": "s-gone", "turn_id": "op-gone-01"})

    gateway.route("subscribe", "gone", body)  # answers 200 (the management API said 410)

    assert _connections() == []
