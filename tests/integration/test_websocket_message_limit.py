"""API Gateway's 128 KiB message limit on the WebSocket path, against the stand-in gateway
(tests/support/ws_gateway.py answers a larger `PostToConnection` 413, as API Gateway does) in
front of the deployed stack's shape under moto: a catch-up event too large for a message is
replaced by `event_too_large` and the rest follows; live deltas are sized as sent (a control
character is 6 bytes of JSON), so none is refused and the live text has no hole; an entry that
fits arrives whole."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError
from websockets.sync.client import ClientConnection

from tests.support.ws_gateway import MAX_PAYLOAD_BYTES, Gateway
from turnkeep.aws_lambda import container
from turnkeep.cli import ws
from turnkeep.cli.sse import apply_delta
from turnkeep.harness import StartTurnInput, resume_turn, start_turn

USER = "user-limit"
CONTROL = "\x01"
"""Sent as `\\u0001`: 6 bytes of JSON for one character."""


def _start(session: str, op_id: str, text: str) -> None:
    deps = container.runtime().deps
    deps.envelopes.create(session, USER)
    start_turn(deps, StartTurnInput(session_id=session, op_id=op_id, user_id=USER, text=text))


SLOW = "scripted?delay_ms=150&words_per_frame=1"
"""A word per 150 ms: each one leaves as its own delta (the live interval is 100 ms)."""


@pytest.fixture
def watching(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Gateway, ClientConnection]]:
    monkeypatch.setenv("TURNKEEP_MODEL", SLOW)
    container.reset_runtime()
    with ws.open_socket(gateway.ws_url, f"Bearer {gateway.token(USER)}") as connection:
        yield gateway, connection


def _until(connection: ClientConnection, last: str) -> list[ws.SocketMessage]:
    """Messages until one of kind `last` (a 30 s silence fails the test)."""
    got: list[ws.SocketMessage] = []
    while not got or got[-1].kind != last:
        message = ws.receive(connection, 30)
        assert message is not None, [m.kind for m in got]
        got.append(message)
    return got


def test_the_stand_in_refuses_a_message_over_128_kib_as_api_gateway_does(gateway: Gateway) -> None:
    client = boto3.client("apigatewaymanagementapi", endpoint_url=gateway.endpoint)

    with pytest.raises(ClientError) as refused:
        client.post_to_connection(ConnectionId="c-any", Data=b"x" * (MAX_PAYLOAD_BYTES + 1))

    assert refused.value.response["Error"]["Code"] == "PayloadTooLargeException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413


def test_a_catch_up_event_too_large_for_a_message_is_replaced_and_the_catch_up_goes_on(
    watching: tuple[Gateway, ClientConnection],
) -> None:
    gateway, connection = watching
    _start("s-big-user", "op-big-user", CONTROL * 30_000)  # ~180 KB as JSON

    ws.subscribe(connection, "s-big-user", "op-big-user", 0)
    resume_turn(container.runtime().deps, "s-big-user", "op-big-user")
    got = _until(connection, "end")

    assert got[0].kind == "status"
    errors = [m.data for m in got if m.kind == "error"]
    assert [e["code"] for e in errors] == ["event_too_large"] * len(errors)
    assert errors  # the user's entry, and the reply's (it echoes the message)
    assert got[-1].data["status"] == "completed"
    assert gateway.too_large == 0


def test_a_live_delta_is_sized_as_sent_so_the_live_text_has_no_hole(
    watching: tuple[Gateway, ClientConnection],
) -> None:
    gateway, connection = watching
    text = CONTROL * 23_000  # one delta of ~138 KB as sent: more than one message
    _start("s-big-delta", "op-big-delta", text)

    ws.subscribe(connection, "s-big-delta", "op-big-delta", 0)
    resume_turn(container.runtime().deps, "s-big-delta", "op-big-delta")
    got = _until(connection, "end")

    live = ""
    for message in got:
        if message.kind == "delta":
            live = apply_delta(live, int(message.data["offset"]), str(message.data["text"]))
    assert live == f"You said: {text}"
    assert gateway.too_large == 0


def test_a_reply_entry_that_fits_a_message_arrives_whole(
    watching: tuple[Gateway, ClientConnection],
) -> None:
    gateway, connection = watching
    text = CONTROL * 21_000  # the reply's entry: ~126 KB as sent, under 128 KiB
    _start("s-fits", "op-fits", text)

    ws.subscribe(connection, "s-fits", "op-fits", 0)
    resume_turn(container.runtime().deps, "s-fits", "op-fits")
    got = _until(connection, "end")

    replies = [m.data for m in got if m.kind == "entry" and m.data.get("role") == "assistant"]
    assert [r["parts"] for r in replies] == [[{"kind": "text", "text": f"You said: {text}"}]]
    assert gateway.too_large == 0
