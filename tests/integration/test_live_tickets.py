"""A browser's WebSocket ticket on the deployed stack's shape (the `gateway` fixture of
test_chat_websocket: template.yaml under moto behind the stand-in API Gateway): `POST
/live/tickets` with the JWT in the header, then `$connect` with `?ticket=` only. A ticket
connects once, as its user, within its lifetime; a JWT in the URL never connects; the functions'
template policies allow exactly the ticket calls they make."""

from __future__ import annotations

import time

import boto3
import httpx
import pytest

from tests.integration.test_chat_websocket import USER
from tests.support.aws_template import load_template
from tests.support.iam_policy import (
    Permission,
    allows,
    checked_permissions,
    function_statements,
    recording_aws_calls,
    stack_refs,
    table_arn,
)
from tests.support.state_machine import BUCKET, TABLE
from tests.support.ws_gateway import Gateway
from tools.sam_local.template import render
from turnkeep.aws_lambda import container
from turnkeep.cli import ws
from turnkeep.live.tickets import TICKET_TTL_S, TicketStore


def _ticket(gateway: Gateway, user: str = USER) -> dict[str, object]:
    answer = httpx.post(
        f"{gateway.url}/live/tickets",
        headers={"Authorization": f"Bearer {gateway.token(user)}"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    body: dict[str, object] = answer.json()
    return body


def _refused(url: str) -> None:
    with (
        pytest.raises(ws.SocketUnavailable, match=r"answered 401"),
        ws.open_socket(url, None),
    ):
        pass


def test_a_ticket_connects_once_as_its_user_and_is_refused_the_second_time(
    gateway: Gateway,
) -> None:
    issued = _ticket(gateway)
    url = f"{issued['websocket_url']}?ticket={issued['ticket']}"

    with ws.open_socket(url, None):
        pass
    _refused(url)

    assert issued["websocket_url"] == gateway.ws_url
    assert issued["expires_in"] == TICKET_TTL_S
    assert list(gateway.users.values()) == [USER]
    assert gateway.refused == 1


def test_a_ticket_presented_after_its_minute_is_refused(gateway: Gateway) -> None:
    issued_long_ago = TicketStore(
        boto3.client("dynamodb"), TABLE, clock=lambda: time.time() - TICKET_TTL_S - 1
    ).issue(USER)

    _refused(f"{gateway.ws_url}?ticket={issued_long_ago.value}")

    assert gateway.users == {}


def test_a_jwt_in_the_url_is_refused_even_when_the_header_would_be_accepted(
    gateway: Gateway,
) -> None:
    token = gateway.token(USER)

    _refused(f"{gateway.ws_url}?token={token}")
    with (
        pytest.raises(ws.SocketUnavailable, match=r"answered 401"),
        ws.open_socket(f"{gateway.ws_url}?token={token}", f"Bearer {token}"),
    ):
        pass

    assert gateway.refused == 2
    assert gateway.users == {}


def test_a_connection_made_with_another_users_ticket_is_that_users(
    gateway: Gateway,
) -> None:
    deps = container.runtime().deps
    deps.envelopes.create("s-bob", "bob")
    deps.envelopes.create("s-alice", USER)
    alices = _ticket(gateway)  # bob got hold of it

    with ws.open_socket(f"{gateway.ws_url}?ticket={alices['ticket']}", None) as connection:
        ws.subscribe(connection, "s-bob", "op-none-000001", 0)
        answer = ws.receive(connection, 10)

    assert list(gateway.users.values()) == [USER]
    assert answer is not None
    assert answer.kind == "error"
    assert answer.data["code"] == "not_found"  # bob's session is not the connection's


def test_the_template_allows_the_ticket_calls_and_no_other_item_to_the_authorizer(
    gateway: Gateway,
) -> None:
    with recording_aws_calls(gateway.host.current_function) as log:
        issued = _ticket(gateway)
        with ws.open_socket(f"{gateway.ws_url}?ticket={issued['ticket']}", None):
            pass

    template = render(load_template(), {"WorkflowType": "STANDARD"})
    refs = stack_refs(TABLE, BUCKET, "turnkeep-turn")
    checked = list(checked_permissions(template, log, refs))
    assert checked
    assert [c for c in checked if not c[2]] == []
    called = {(function, p.action) for function, p, _ in checked}
    assert ("ApiFunction", "dynamodb:PutItem") in called
    assert ("LiveAuthorizerFunction", "dynamodb:DeleteItem") in called
    authorizer = function_statements(template, "LiveAuthorizerFunction", refs)
    session_item = (("dynamodb:LeadingKeys", "SESSION#s-1"),)
    for action in ("DeleteItem", "PutItem", "GetItem", "UpdateItem"):
        permission = Permission(f"dynamodb:{action}", table_arn(TABLE), session_item)
        assert not allows(authorizer, permission), action
    ticket_item = (("dynamodb:LeadingKeys", "LIVETICKET#x"),)
    assert not allows(authorizer, Permission("dynamodb:GetItem", table_arn(TABLE), ticket_item))
