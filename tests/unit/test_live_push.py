"""The steps' WebSocket pusher on a real local turn: subscriptions in a moto table, a
management client that refuses some connections. A push failure never fails a step; a
connection that is gone is dropped; the others still get the whole turn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.integration.turns_support import USER, make_turn_harness
from tests.support.aws_template import create_table, load_template
from turnkeep.harness import run_turn
from turnkeep.live.connections import Connections
from turnkeep.live.push import WebSocketPusher

TABLE = "live-table"


class Management:
    """A management API whose `post_to_connection` fails for some connections."""

    def __init__(self, gone: set[str], broken: set[str]) -> None:
        self.gone, self.broken = gone, broken
        self.sent: dict[str, list[dict[str, Any]]] = {}

    def post_to_connection(self, *, ConnectionId: str, Data: bytes) -> None:
        if ConnectionId in self.gone:
            raise ClientError({"Error": {"Code": "GoneException"}}, "PostToConnection")
        if ConnectionId in self.broken:
            raise ClientError({"Error": {"Code": "InternalServerError"}}, "PostToConnection")
        self.sent.setdefault(ConnectionId, []).append(json.loads(Data))


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> Iterator[Connections]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("dynamodb")
        create_table(client, TABLE, load_template())
        yield Connections(client, TABLE)


def test_a_gone_or_failing_connection_never_fails_the_turn_and_a_gone_one_is_dropped(
    tmp_path: Path, connections: Connections
) -> None:
    h = make_turn_harness(tmp_path)
    management = Management(gone={"c-gone"}, broken={"c-broken"})
    pusher = WebSocketPusher(connections, management)
    h.deps = replace(h.deps, live=pusher)
    op = "op-push-1"
    for conn in ("c-ok", "c-gone", "c-broken"):
        connections.subscribe(h.session_id, op, conn, USER, 0)

    result = run_turn(h.deps, h.session_id, USER, "hello there", op_id=op)

    assert result.status == "completed"
    got = management.sent["c-ok"]
    # The user's entry (start_turn's commit), the reply's entry, the end; frames between.
    kinds = [m["event"] for m in got if m["event"] not in ("delta", "frame")]
    assert kinds == ["entry", "entry", "end"]
    assert got[-1]["data"]["status"] == "completed"
    # The harness clock stands still: one delta leaves, the reply's entry carries the rest.
    live = "".join(m["data"]["text"] for m in got if m["event"] == "delta")
    assert live
    assert "You said: hello there".startswith(live)
    reply = [m["data"] for m in got if m["event"] == "entry"][-1]
    assert reply["parts"] == [{"kind": "text", "text": "You said: hello there"}]
    remaining = {s.connection_id for s in connections.subscribers(h.session_id, op)}
    assert remaining == {"c-ok", "c-broken"}
    assert pusher.stats.gone == 1
    assert pusher.stats.failures >= 1


def test_a_turn_nobody_watches_reads_its_subscribers_and_posts_nothing(
    tmp_path: Path, connections: Connections
) -> None:
    h = make_turn_harness(tmp_path)
    management = Management(gone=set(), broken=set())
    pusher = WebSocketPusher(connections, management)
    h.deps = replace(h.deps, live=pusher)

    result = run_turn(h.deps, h.session_id, USER, "hello", op_id="op-push-2")

    assert result.status == "completed"
    assert management.sent == {}
    assert pusher.stats.posts == 0


def test_the_steps_pusher_reads_subscriptions_in_the_envelope_urls_own_region(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from turnkeep.live.push import websocket_pusher
    from turnkeep.plumbing import clients

    monkeypatch.setattr(clients, "_CLIENTS", {})  # clients made inside mock_aws below
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        # The table exists in eu-west-2 only: a client in the default region would not find it.
        create_table(boto3.client("dynamodb", region_name="eu-west-2"), TABLE, load_template())
        pusher = websocket_pusher(
            "https://ws.example/prod", f"aws://?table={TABLE}&region=eu-west-2"
        )

        pusher._connections.subscribe("s1", "op1", "c1", USER, 0)

        watching = pusher._connections.subscribers("s1", "op1")

        assert [(w.connection_id, w.user_id) for w in watching] == [("c1", USER)]


def test_a_typed_turns_end_message_carries_its_output(
    tmp_path: Path, connections: Connections
) -> None:
    from turnkeep import Agent

    h = make_turn_harness(tmp_path)
    management = Management(gone=set(), broken=set())
    h.deps = replace(
        h.deps, live=WebSocketPusher(connections, management), agent=Agent(output_type=list[int])
    )
    connections.subscribe(h.session_id, "op-typed", "c-ok", USER, 0)

    result = run_turn(
        h.deps, h.session_id, USER, 'call final_result {"result": [3, 1]}', op_id="op-typed"
    )

    assert result.status == "completed", result.error
    end = management.sent["c-ok"][-1]
    assert end["event"] == "end"
    assert (end["data"]["output"], end["data"]["error_code"]) == ([3, 1], None)


def test_an_end_message_too_large_for_its_output_says_where_to_read_it() -> None:
    from turnkeep.live.push import MAX_MESSAGE_BYTES, end_message

    record = {"status": "completed", "rounds": 1, "output": ["x" * 1000] * 200}
    body = json.loads(end_message("op-big", record))

    assert len(json.dumps(record["output"])) > MAX_MESSAGE_BYTES
    assert body["data"]["output"] is None
    assert "GET .../turns/op-big" in body["data"]["output_omitted"]
    assert body["data"]["status"] == "completed"
