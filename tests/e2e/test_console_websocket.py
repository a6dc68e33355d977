"""The web console against the deployed stack's shape: template.yaml under moto behind the
stand-in API Gateway (tests/support/ws_gateway.py: the HTTP API's JWT check and Lambda, the
WebSocket API's identity sources, real `$connect` authorizer and `routes` handler, the console's
files served beside the API as a static site), driven in Debian's chromium. The page finds the
WebSocket at `GET /live`, connects with a single-use ticket and follows the turn on it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.e2e.test_console_browser import (
    WATCH_PAINTS,
    last_turn,
    new_session,
    send,
    wait_status,
)
from tests.support.browser import chromium
from tests.support.ws_gateway import Gateway, deployed_gateway

pytestmark = pytest.mark.slow

# One word a frame, 120 ms apart: the reply paints many times while it streams.
MODEL = "scripted?delay_ms=120&words_per_frame=1"
WORDS = "tell me " + " ".join(f"w{i}" for i in range(25))
USER = "carol"

if TYPE_CHECKING:
    from playwright.sync_api import Page


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    with deployed_gateway(monkeypatch, containers=True, TURNKEEP_MODEL=MODEL) as running:
        running.console = True
        yield running


def _connect(page: Page, gateway: Gateway, token: str) -> None:
    page.goto(gateway.url + "/")
    page.fill("#token", token)
    page.keyboard.press("Enter")
    page.wait_for_selector("#signed-in:has-text('Connected to')")


def test_a_turn_streams_over_the_websocket_with_no_poll_and_no_jwt_in_any_url(
    gateway: Gateway,
) -> None:
    token = gateway.token(USER)
    with chromium() as browser:
        page = browser.new_page()
        requests: list[str] = []
        sockets: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.on("websocket", lambda socket: sockets.append(socket.url))
        _connect(page, gateway, token)
        new_session(page, "over the socket")
        page.evaluate(WATCH_PAINTS)

        turn = send(page, WORDS)
        wait_status(page, "completed", turn)

        assert "You said: tell me w0" in last_turn(page).inner_text()
        assert page.inner_text("#connection-state") == "live (WebSocket)"
        replies = page.evaluate("() => window.__paints.replies")
    assert len(replies) >= 3, replies  # it grew on the page as the socket carried it
    assert [url for url in requests if "/events" in url or "/stream" in url] == []
    assert "/stream" not in " ".join(gateway.paths)
    assert any(url.endswith("/live/tickets") for url in requests)
    [socket] = sockets
    assert socket.startswith(f"{gateway.ws_url}?ticket=")
    assert [url for url in [*requests, socket] if token in url] == []
    assert list(gateway.users.values()) == [USER]
    pushed = gateway.messages()
    assert any(m["event"] == "delta" for m in pushed)
    assert pushed[-1]["event"] == "end"


def test_a_socket_that_cannot_be_opened_leaves_the_turn_to_polling_and_the_page_says_so(
    gateway: Gateway,
) -> None:
    with chromium() as browser:
        page = browser.new_page()
        # A ticket the authorizer does not know: the handshake is refused (401).
        unknown = {"ticket": "A" * 43, "expires_in": 60, "websocket_url": gateway.ws_url}
        page.route(
            "**/live/tickets",
            lambda route: route.fulfill(
                status=201, content_type="application/json", body=json.dumps(unknown)
            ),
        )
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        _connect(page, gateway, gateway.token(USER))
        new_session(page, "no socket")

        turn = send(page, "hello there")
        wait_status(page, "completed", turn)

        assert "You said: hello there" in last_turn(page).inner_text()
        state = page.inner_text("#connection-state")
    assert state == "live (polling: the WebSocket cannot be opened)"
    assert gateway.refused == 1
    assert any("/events?" in url for url in requests)
    assert not [url for url in requests if "/stream" in url]
