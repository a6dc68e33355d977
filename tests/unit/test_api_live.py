"""`GET /live` says where a deployment's turns are followed live, and `POST /live/tickets`
refuses to issue a ticket where no WebSocket API exists (the ticket itself: the integration
tests of the deployed shape, tests/integration/test_live_tickets.py)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.support.api_client import auth, make_api_harness
from turnkeep.api import live
from turnkeep.api.settings import ApiSettings
from turnkeep.live.tickets import TicketStore

WS_URL = "wss://abc123.execute-api.us-east-1.amazonaws.com/live"


def test_a_server_without_a_websocket_api_says_so_and_issues_no_ticket() -> None:
    for api in make_api_harness(run_turns=False):
        live = api.client.get("/live", headers=auth())
        ticket = api.client.post("/live/tickets", headers=auth())

        assert live.status_code == 200
        assert live.json() == {"websocket_url": None, "stream": False}
        assert ticket.status_code == 404
        assert ticket.json()["error"]["code"] == "no_websocket"


def test_the_configured_websocket_url_is_named_and_the_routes_need_a_caller() -> None:
    for api in make_api_harness(run_turns=False, settings=ApiSettings(live_url=WS_URL)):
        live = api.client.get("/live", headers=auth())
        anonymous = [api.client.get("/live"), api.client.post("/live/tickets")]

        assert live.json() == {"websocket_url": WS_URL, "stream": False}
        assert [a.status_code for a in anonymous] == [401, 401]


def test_the_openapi_schema_describes_both_live_routes() -> None:
    for api in make_api_harness(run_turns=False):
        paths = api.client.get("/openapi.json").json()["paths"]

        assert set(paths["/live"]) == {"get"}
        assert "201" in paths["/live/tickets"]["post"]["responses"]
        assert "404" in paths["/live/tickets"]["post"]["responses"]


def test_a_websocket_url_on_a_server_without_the_aws_table_is_a_clear_503_not_a_500() -> None:
    for api in make_api_harness(run_turns=False, settings=ApiSettings(live_url=WS_URL)):
        answer = api.client.post("/live/tickets", headers=auth())

        assert answer.status_code == 503
        error = answer.json()["error"]
        assert error["code"] == "live_unavailable"
        assert "TURNKEEP_LIVE_URL needs TURNKEEP_ENVELOPE_URL" in error["message"]


def test_a_ticket_the_table_refuses_to_store_is_a_503_to_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Throttled:
        """A DynamoDB client whose every write is throttled, as botocore raises it."""

        def put_item(self, **_: object) -> None:
            error = {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}
            raise ClientError(error, "PutItem")  # type: ignore[arg-type]

    monkeypatch.setattr(live, "_store", lambda ctx: TicketStore(Throttled(), "sessions"))
    for api in make_api_harness(run_turns=False, settings=ApiSettings(live_url=WS_URL)):
        answer = api.client.post("/live/tickets", headers=auth())

        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "unavailable"
        assert "ThrottlingException" in answer.json()["error"]["message"]
