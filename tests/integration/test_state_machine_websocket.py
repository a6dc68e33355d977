"""A turn watched through the WebSocket path under moto: the real `subscribe` handler of
functions/live/ records the connection and sends the catch-up, the real step handlers run by
moto's Step Functions interpreter push every new event through the management API, and moto's
`apigatewaymanagementapi` records what each connection was sent."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest
from moto.apigatewaymanagementapi.models import apigatewaymanagementapi_backends

from tests.support.iam_policy import (
    ACCOUNT,
    REGION,
    AwsCall,
    AwsCallLog,
    Permission,
    allows,
    checked_permissions,
    function_statements,
    recording_aws_calls,
    stack_refs,
)
from tests.support.lambda_host import FakeContext, load_function_module
from tests.support.state_machine import BUCKET, TABLE, USER, Deployed, deploy
from turnkeep.aws_lambda import container
from turnkeep.cli.sse import apply_delta
from turnkeep.events import turn_events
from turnkeep.harness import StartTurnInput, resume_turn, start_turn
from turnkeep.live.connections import Connections
from turnkeep.storage import open_storage

ENDPOINT = "https://wsapi01.execute-api.us-east-1.amazonaws.com/live"


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    with deploy(monkeypatch, "STANDARD", TURNKEEP_WS_ENDPOINT=ENDPOINT) as deployed:
        yield deployed


def sent(connection: str) -> list[dict[str, Any]]:
    """Every message moto's management API recorded for `connection`, in order."""
    data = apigatewaymanagementapi_backends[ACCOUNT][REGION].connections[connection].data
    text, decoder, out, at = data.decode("utf-8"), json.JSONDecoder(), [], 0
    while at < len(text):
        item, at = decoder.raw_decode(text, at)
        out.append(item)
    return out


def ws_event(route: str, connection: str, user: str | None, body: str | None) -> dict[str, Any]:
    context: dict[str, Any] = {"routeKey": route, "connectionId": connection, "stage": "live"}
    if user is not None:
        context["authorizer"] = {"principalId": user, "sub": user}
    return {"requestContext": context, "body": body, "isBase64Encoded": False}


def _start(session: str, op_id: str, text: str) -> None:
    deps = container.runtime().deps
    if deps.envelopes.get(session) is None:
        deps.envelopes.create(session, USER)
    start_turn(deps, StartTurnInput(session_id=session, op_id=op_id, user_id=USER, text=text))


def _execute(deployed: Deployed, session: str, op_id: str) -> None:
    import time

    execution = deployed.sfn.start_execution(
        stateMachineArn=deployed.state_machine_arn,
        name=op_id,
        input=json.dumps({"session_id": session, "op_id": op_id, "round": 0}),
    )["executionArn"]
    deadline = time.monotonic() + 60
    while deployed.sfn.describe_execution(executionArn=execution)["status"] == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert deployed.sfn.describe_execution(executionArn=execution)["status"] == "SUCCEEDED"


def _subscribe(app: Any, connection: str, user: str, session: str, op_id: str) -> None:
    body = json.dumps({"action": "subscribe", "session_id": session, "turn_id": op_id})
    answer = app.routes(ws_event("subscribe", connection, user, body), FakeContext("LiveFunction"))
    assert answer == {"statusCode": 200}


def _subscriptions(session: str) -> list[str]:
    items = boto3.client("dynamodb").query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
        ExpressionAttributeValues={":pk": {"S": f"SESSION#{session}"}, ":p": {"S": "LIVE#"}},
    )["Items"]
    return [i["sk"]["S"] for i in items]


def test_a_subscriber_receives_a_whole_turn_in_order_catch_up_then_live_without_gap(
    stack: Deployed,
) -> None:
    app = load_function_module("live")
    session, op_id = "ws-session", "op-ws-0001"
    _start(session, op_id, 'call echo {"text": "ping"}')
    _subscribe(app, "conn-alice", USER, session, op_id)
    _subscribe(app, "conn-mallory", "user-2", session, op_id)  # not the owner
    _execute(stack, session, op_id)

    got = sent("conn-alice")
    storage = open_storage(stack.storage_url, session)
    try:
        page = turn_events(storage, None, op_id, None, 1000)
    finally:
        storage.close()
    assert got[0] == {
        "event": "status",
        "id": None,
        "data": {"turn_id": op_id, "status": "running"},
    }
    assert got[-1]["event"] == "end"
    assert got[-1]["data"]["status"] == "completed"
    assert got[-1]["data"]["rounds"] == 2
    seqs = [m["id"] for m in got if m["id"] is not None]
    assert seqs == sorted(set(seqs))  # in order, never twice
    entries = [m["data"] for m in got if m["event"] == "entry"]
    assert entries == [e.model_dump(mode="json", exclude_none=True) for e in page.events]
    assert [e["role"] for e in entries] == ["user", "assistant", "tool", "assistant"]
    # The live text (frames and deltas by the offset rule) shows each reply before its entry.
    bubbles: dict[str, str] = {}
    for m in got:
        if m["event"] in ("frame", "delta"):
            rid = m["data"]["response_id"]
            bubbles[rid] = apply_delta(bubbles.get(rid, ""), m["data"]["offset"], m["data"]["text"])
    assert bubbles[f"{op_id}:r1"] == "Tool echo returned: ping"
    assert any(m["event"] == "delta" for m in got)
    assert all(m["id"] is None for m in got if m["event"] == "delta")

    # Another user's subscribe is refused like a missing session and records nothing.
    assert sent("conn-mallory") == [
        {
            "event": "error",
            "id": None,
            "data": {"code": "not_found", "message": "session not found"},
        }
    ]
    assert _subscriptions(session) == [f"LIVE#{op_id}#conn-alice"]
    app.routes(ws_event("$disconnect", "conn-alice", USER, None), FakeContext("LiveFunction"))
    assert _subscriptions(session) == []


@pytest.mark.parametrize(
    ("body", "route", "code"),
    [
        ("{not json", "subscribe", "invalid_json"),
        (
            '{"action": "subscribe", "session_id": "s", "turn_id": "t", "cursor": -1}',
            "subscribe",
            "invalid_message",
        ),
        (
            '{"action": "subscribe", "session_id": "s", "turn_id": "t", "extra": 1}',
            "subscribe",
            "invalid_message",
        ),
        ('{"action": "publish"}', "$default", "unknown_action"),
        ('{"action": "subscribe", "pad": "' + "x" * 5000 + '"}', "subscribe", "message_too_large"),
        # 2,000 levels in under 4 KB: the parser's recursion limit, not an internal error.
        ("[" * 2000 + "]" * 2000, "subscribe", "invalid_json"),
        (
            '{"action": "subscribe", "x": ' + "[" * 1990 + "]" * 1990 + "}",
            "$default",
            "invalid_json",
        ),
        # A number DynamoDB cannot store (over 38 digits), for a real session and turn.
        (
            '{"action": "subscribe", "session_id": "ws-bad", "turn_id": "op-ws-bad1", "cursor": '
            + str(10**200)
            + "}",
            "subscribe",
            "invalid_message",
        ),
        (
            '{"action": "subscribe", "session_id": "ws-bad", "turn_id": "op-ws-bad1", "cursor": '
            + str(2**62 + 1)
            + "}",
            "subscribe",
            "invalid_message",
        ),
    ],
)
def test_bad_messages_get_an_error_frame_and_change_nothing(
    stack: Deployed, body: str, route: str, code: str
) -> None:
    app = load_function_module("live")
    _start("ws-bad", "op-ws-bad1", "hello")
    app.routes(ws_event(route, "conn-bad", USER, body), FakeContext("LiveFunction"))

    [only] = sent("conn-bad")
    assert only["event"] == "error"
    assert only["data"]["code"] == code
    assert _subscriptions("ws-bad") == []


def test_a_subscribe_to_an_ended_turn_gets_its_events_and_end_and_no_subscription(
    stack: Deployed,
) -> None:
    app = load_function_module("live")
    _start("ws-late", "op-ws-late", "hello")
    _execute(stack, "ws-late", "op-ws-late")
    _subscribe(app, "conn-late", USER, "ws-late", "op-ws-late")

    got = sent("conn-late")
    assert [m["event"] for m in got] == ["status", "entry", "entry", "end"]
    assert got[-1]["data"]["status"] == "completed"
    assert _subscriptions("ws-late") == []


def test_every_aws_call_of_the_websocket_path_is_allowed_by_the_template_and_only_there(
    stack: Deployed,
) -> None:
    app = load_function_module("live")
    acting: list[str] = []

    def current() -> str | None:
        return acting[-1] if acting else stack.host.current_function()

    with recording_aws_calls(current) as log:
        _start("ws-iam", "op-ws-iam1", "hello")
        acting.append("LiveFunction")
        _subscribe(app, "conn-iam", USER, "ws-iam", "op-ws-iam1")
        acting.pop()
        _execute(stack, "ws-iam", "op-ws-iam1")
        acting.append("LiveFunction")
        app.routes(ws_event("$disconnect", "conn-iam", USER, None), FakeContext("LiveFunction"))
        acting.pop()

    refs = stack_refs(TABLE, BUCKET, "turnkeep-turn")
    template = stack.template
    pushes: dict[str, int] = {}
    for function, permission, allowed in checked_permissions(template, log, refs):
        assert allowed, (function, permission)
        if permission.action == "execute-api:ManageConnections":
            pushes[function] = pushes.get(function, 0) + 1
    assert {"ModelStepFunction", "FinishTurnFunction", "LiveFunction"} <= set(pushes)
    # Nothing else may post: not the HTTP API, not the authorizer; not another stage or API.
    post = Permission(
        "execute-api:ManageConnections",
        f"arn:aws:execute-api:{REGION}:{ACCOUNT}:wsapi01/live/POST/@connections/c",
    )
    for function in ("ApiFunction", "LiveAuthorizerFunction"):
        assert not allows(function_statements(template, function, refs), post), function
    model = function_statements(template, "ModelStepFunction", refs)
    for other in ("wsapi01/prod/POST/@connections/c", "other/live/POST/@connections/c"):
        arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{other}"
        assert not allows(model, Permission("execute-api:ManageConnections", arn))


def _in_process(monkeypatch: pytest.MonkeyPatch, frame_ms: str) -> Any:
    """The step runtime of the deployed configuration (TURNKEEP_WS_ENDPOINT set), with recovery
    frames every `frame_ms` (60000: none within a scripted reply, so only the commits' own
    mark checks can find a watcher that joins mid-round)."""
    monkeypatch.setenv("TURNKEEP_FRAME_INTERVAL_MS", frame_ms)
    container.reset_runtime()
    return container.runtime().deps


def _subscriber_reads(log: AwsCallLog) -> list[AwsCall]:
    """The Queries of a turn's subscriptions (`LIVE#<op>#...`) in `log`."""
    return [
        c
        for c in log.calls
        if c.operation == "Query"
        and str(
            c.params.get("ExpressionAttributeValues", {}).get(":p", {}).get("S", "")
        ).startswith("LIVE#")
    ]


def _mark_reads(log: AwsCallLog) -> list[AwsCall]:
    """The GetItems of the watch mark (a step's re-read at a frame flush) in `log`."""
    return [c for c in log.calls if c.operation == "GetItem" and "liveGen" in str(c.params)]


@pytest.mark.parametrize("frame_ms", ["0", "60000"])
def test_a_turn_nobody_watches_never_reads_its_subscribers(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch, frame_ms: str
) -> None:
    deps = _in_process(monkeypatch, frame_ms)
    # Started outside the record: on AWS the API starts a turn, and it has no pusher.
    _start("ws-unwatched", "op-ws-unw1", "hello there")

    with recording_aws_calls(lambda: "steps") as log:
        result = resume_turn(deps, "ws-unwatched", "op-ws-unw1")

    assert result.status == "completed"
    assert _subscriber_reads(log) == []
    assert [c for c in log.calls if c.service == "apigatewaymanagementapi"] == []
    if frame_ms == "60000":  # no frame flush: not even the mark is read again
        assert _mark_reads(log) == []


@pytest.mark.parametrize("frame_ms", ["0", "60000"])
def test_a_watcher_that_subscribes_mid_round_gets_the_rest_of_the_turn(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch, frame_ms: str
) -> None:
    deps = _in_process(monkeypatch, frame_ms)
    app = load_function_module("live")
    session, op_id = "ws-mid", "op-ws-mid1"
    _start(session, op_id, "hello there")
    joined: list[bool] = []

    def join_once(_event: object) -> None:
        # The model step has read the (absent) mark and streams: a watcher comes now.
        if not joined:
            joined.append(True)
            _subscribe(app, "conn-late", USER, session, op_id)

    with recording_aws_calls(lambda: "steps") as log:
        result = resume_turn(deps, session, op_id, on_event=join_once)

    assert result.status == "completed"
    if frame_ms == "60000":
        # No frame flush re-read the mark: the settlement's own envelope condition found it.
        assert _mark_reads(log) == []
    got = sent("conn-late")
    assert got[0]["event"] == "status"
    assert got[-1]["event"] == "end"
    assert got[-1]["data"]["status"] == "completed"
    replies = [m for m in got if m["event"] == "entry" and m["data"].get("role") == "assistant"]
    assert [r["data"]["parts"] for r in replies] == [
        [{"kind": "text", "text": "You said: hello there"}]
    ]


def test_a_stale_mark_costs_one_subscriber_read_and_is_dropped(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    deps = _in_process(monkeypatch, "60000")
    app = load_function_module("live")
    session, op_id = "ws-stale", "op-ws-stale1"
    _start(session, op_id, "hello there")
    _subscribe(app, "conn-left", USER, session, op_id)
    app.routes(ws_event("$disconnect", "conn-left", USER, None), FakeContext("LiveFunction"))
    connections = Connections(boto3.client("dynamodb"), TABLE)
    assert op_id in connections.read_mark(session).ops  # the watcher left; its mark stayed

    with recording_aws_calls(lambda: "steps") as log:
        result = resume_turn(deps, session, op_id)

    assert result.status == "completed"
    assert len(_subscriber_reads(log)) == 1
    assert op_id not in connections.read_mark(session).ops


def test_an_unwatched_tool_turn_makes_the_requests_it_makes_without_a_websocket_api(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    deps = _in_process(monkeypatch, "60000")
    counts = []
    for session, live in (("ws-tools-plain", None), ("ws-tools-pushing", deps.live)):
        _start(session, f"op-{session}", 'call echo {"text": "ping"}')
        with recording_aws_calls(lambda: "steps") as log:
            result = resume_turn(replace(deps, live=live), session, f"op-{session}")
        assert result.status == "completed"
        counts.append(Counter(f"{c.service}:{c.operation}" for c in log.calls))

    plain, pushing = counts
    assert pushing == plain
