"""The web console in a real browser: headless Debian chromium (Playwright, system browser)
against a real `turnkeep serve` process (SQLite in a tmp dir, the scripted model slowed down
so replies stream in frame by frame). One scenario walks what a person does; screenshots of
each state are written to a tmp dir (or `TURNKEEP_CONSOLE_SCREENSHOTS`, e.g. docs/console)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.support.browser import Pages, clear, screenshot_dir
from tests.support.console import module_server, serving
from tests.support.real_server import RealServer

pytestmark = pytest.mark.slow

# Slow frames (one word each) so a reply paints many times; a start limit of 8 per minute so
# the scenario's own turns reach a real 429.
MODEL = "scripted?delay_ms=120&words_per_frame=1"
START_LIMIT = 8
TURN_MS = 30_000

if TYPE_CHECKING:
    from playwright.sync_api import Page


# One server for the module's tests (each signs in as a user of its own); the start limit is
# per session, so one test's turns never count against another's.
ENV = {"TURNKEEP_MODEL": MODEL, "TURNKEEP_TURN_START_LIMIT": str(START_LIMIT)}
server = module_server(ENV)


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[RealServer]:
    """A server for one test alone (one it kills and starts again)."""
    with serving(tmp_path / "data", ENV) as real:
        yield real


class Shots:
    """Numbered screenshots of the scenario's states."""

    def __init__(self, page: Page, target: Path) -> None:
        self.page = page
        self.target = target
        self.names: list[str] = []

    def take(self, name: str, *, full_page: bool = False) -> None:
        path = self.target / f"{len(self.names) + 1:02d}-{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        self.names.append(path.name)


# A rAF loop records what the newest turn shows at every painted frame until the turn ends,
# and where the message box sits (a layout jump would move it).
WATCH_PAINTS = """() => {
  window.__paints = { states: [], replies: [], composerTops: [], ended: false };
  const live = new Set(["running", "awaiting_approval", "cancelling"]);
  const box = document.getElementById("composer");
  const turns = () => document.querySelectorAll("#transcript > .turn");
  const before = turns().length;
  function frame() {
    const all = turns();
    const turn = all.length > before ? all[all.length - 1] : null;
    window.__paints.composerTops.push(box.getBoundingClientRect().top);
    if (turn) {
      if (turn.dataset.status && !live.has(turn.dataset.status)) {
        window.__paints.ended = true;
        return;
      }
      const body = turn.querySelector(".turn-body").textContent;
      const states = window.__paints.states;
      if (states[states.length - 1] !== body) states.push(body);
      const bubbles = turn.querySelectorAll(".msg.assistant .bubble-text");
      const reply = bubbles.length ? bubbles[bubbles.length - 1].textContent : "";
      const replies = window.__paints.replies;
      if (reply && replies[replies.length - 1] !== reply) replies.push(reply);
    }
    requestAnimationFrame(frame);
  }
  requestAnimationFrame(frame);
}"""


def last_turn(page: Page) -> Any:
    return page.locator("#transcript > .turn").last


def wait_status(page: Page, status: str, turns: int) -> None:
    """Wait until the page shows `turns` turns and the last one has `status`."""
    page.wait_for_selector(
        f"#transcript > .turn:nth-child({turns})[data-status={status}]", timeout=TURN_MS
    )
    assert page.locator("#transcript > .turn").count() == turns


def body_order(page: Page) -> list[str]:
    """What the newest turn shows, in page order: user / assistant / result / approval."""
    order: list[str] = last_turn(page).evaluate(
        """turn => [...turn.querySelectorAll(".turn-body > :not([hidden])")].map((node) =>
          node.classList.contains("tool-result") ? "result"
          : node.classList.contains("approval") ? "approval"
          : node.classList.contains("user") ? "user" : "assistant")"""
    )
    return order


def send(page: Page, text: str) -> int:
    """Type a message and send it with Enter, keyboard only; the number its turn will have."""
    turns: int = page.locator("#transcript > .turn").count()
    page.focus("#message")
    page.fill("#message", text)
    page.keyboard.press("Enter")
    return turns + 1


def connect(page: Page, server: RealServer, user: str) -> None:
    """Open the console on `server` and connect as `user` (the dev token)."""
    page.goto(server.url + "/")
    page.fill("#token", f"dev-{user}")
    page.keyboard.press("Enter")
    page.wait_for_selector("#signed-in:has-text('Connected to')")


def api_client(server: RealServer, user: str) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer dev-{user}"}, timeout=30.0
    )


def new_session(page: Page, title: str) -> None:
    """Create a session with `title` from the list's form; it opens."""
    page.fill("#new-title", title)
    page.keyboard.press("Enter")
    page.wait_for_selector(f"#session-title:has-text('{title}')")


def set_tool_approval(page: Page, tools: str) -> None:
    """Save the open session's "tools needing approval" host key from the form."""
    page.fill("#meta-tool-approval", tools)
    page.click("#meta-form button[type=submit]")
    page.wait_for_selector("#meta-status:has-text('Saved.')")


def axe_critical(page: Page) -> list[dict[str, Any]]:
    """axe-core's violations on the page (printed); the critical ones are returned."""
    from axe_playwright_python.sync_playwright import Axe

    violations = Axe().run(page).response["violations"]
    for violation in violations:
        print(f"axe: {violation['impact']}: {violation['id']} ({len(violation['nodes'])} nodes)")
    return [v for v in violations if v["impact"] == "critical"]


def test_a_person_runs_a_session_in_the_console_from_first_message_to_delete(
    server: RealServer, tmp_path: Path, browser: Pages
) -> None:
    target = screenshot_dir(tmp_path / "shots")
    clear(target)
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    shots = Shots(page, target)

    # Connect: the token goes in the form, then sessionStorage, never in a URL.
    connect(page, server, "alice")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    stored = page.evaluate("() => sessionStorage.getItem('turnkeep.token')")
    assert stored == "dev-alice"

    new_session(page, "Cat facts")
    # The new session opens with the message box focused.
    page.wait_for_function("() => document.activeElement.id === 'message'")

    # Shift+Enter is a new line, not a send.
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    assert page.input_value("#message") == "first line\nsecond line"
    assert page.locator("#transcript > .turn").count() == 0

    # The reply streams in: several painted states before the end, the box never moves.
    page.evaluate(WATCH_PAINTS)
    turn = send(page, "remember my cat is Rex")
    wait_status(page, "completed", turn)
    paints = page.evaluate("() => window.__paints")
    assert paints["ended"]
    assert len(paints["states"]) > 2, paints["states"]
    assert len(set(paints["composerTops"])) == 1, "the message box moved while streaming"
    # This server has the stream route: the turn was followed on it.
    assert page.inner_text("#connection-state") == "live (stream)"
    assert any("/stream" in url for url in requests)
    turn_text = last_turn(page).inner_text()
    assert "working_notes_update" in turn_text
    assert "Noted." in turn_text
    assert "2 rounds" in turn_text

    # The notes panel shows the note and its size against the 32 KiB cap.
    page.wait_for_selector("#notes-text:has-text('my cat is Rex')")
    assert "13 of 32768 bytes" in page.inner_text("#notes-size")

    # A longer reply grows in place: each painted reply is a prefix of the settled one.
    page.evaluate(WATCH_PAINTS)
    turn = send(page, "what do you remember?")
    page.wait_for_selector(
        "#transcript .msg.assistant.provisional .bubble-text:not(:empty)", timeout=TURN_MS
    )
    shots.take("streaming")
    wait_status(page, "completed", turn)
    replies = page.evaluate("() => window.__paints.replies")
    final = last_turn(page).locator(".msg.assistant .bubble-text").last.inner_text()
    assert "my cat is Rex" in final
    assert len(replies) > 2, replies
    assert all(final.startswith(r.strip()) for r in replies), (replies, final)
    # The agent panel (GET /agent): its tools, the gated ones marked once the key is set.
    page.wait_for_selector("#agent summary:has-text('Tools')")
    page.click("#agent summary:has-text('Tools')")
    assert "echo" in page.inner_text("#agent")
    shots.take("notes", full_page=True)

    # Host keys: tool approval for echo.
    set_tool_approval(page, "echo")

    # A gated call waits; its card shows the arguments; approve runs it.
    turn = send(page, 'call echo {"text": "ship it"}')
    card = page.locator("#transcript .approval.pending")
    card.wait_for(timeout=TURN_MS)
    assert '"text": "ship it"' in card.locator(".approval-args").inner_text()
    page.wait_for_selector("#pending-list .approval.pending", timeout=10_000)
    waiting = f"#transcript > .turn:nth-child({turn})[data-status=awaiting_approval]"
    page.wait_for_selector(waiting)
    shots.take("approval")
    critical = axe_critical(page)
    assert not critical, critical
    card.locator("button", has_text="Approve").click()
    wait_status(page, "completed", turn)
    result = last_turn(page).locator(".tool-result").last.inner_text()
    assert "ship it" in result
    assert body_order(page)[-2:] == ["result", "assistant"]  # the reply after its result
    assert "Approved" in last_turn(page).locator(".approval").inner_text()

    # Deny another one with a reason: the model gets an error result naming it.
    turn = send(page, 'call echo {"text": "drop the table"}')
    card = page.locator("#transcript .approval.pending")
    card.wait_for(timeout=TURN_MS)
    card.locator("input").fill("not today")
    card.locator("button", has_text="Deny").click()
    wait_status(page, "completed", turn)
    denied = last_turn(page).locator(".tool-result.is-error")
    assert "not today" in denied.inner_text()
    shots.take("denied")

    # Edit the arguments: the call runs with the edited ones.
    turn = send(page, 'call echo {"text": "draft"}')
    card = page.locator("#transcript .approval.pending")
    card.wait_for(timeout=TURN_MS)
    card.locator("button", has_text="Edit arguments").click()
    editor = card.locator("textarea")
    editor.fill("not json")
    card.locator("button", has_text="Run with these arguments").click()
    assert "not valid JSON" in card.locator(".approval-status").inner_text()
    editor.fill('{"text": "final copy"}')
    card.locator("button", has_text="Run with these arguments").click()
    wait_status(page, "completed", turn)
    assert "final copy" in last_turn(page).locator(".tool-result").last.inner_text()
    assert body_order(page)[-2:] == ["result", "assistant"]
    assert "edited arguments" in last_turn(page).locator(".approval").inner_text()

    # A slow turn is cancelled while it streams (and the title changes on the way).
    page.fill("#meta-title", "Rex facts")
    set_tool_approval(page, "")
    page.wait_for_selector("#session-list .session-title:has-text('Rex facts')")
    assert page.inner_text("#session-title") == "Rex facts"
    turn = send(page, "tell me " + " ".join(f"word{i}" for i in range(30)))
    page.wait_for_selector(
        "#transcript .msg.assistant.provisional .bubble-text:has-text('word')",
        timeout=TURN_MS,
    )
    page.click("#cancel")
    wait_status(page, "aborted", turn)
    assert "aborted" in last_turn(page).locator(".turn-status").inner_text()
    shots.take("cancelled")

    # API errors read as sentences: 422 for an oversize message, and the text stays.
    send(page, "x" * 33_000)
    page.wait_for_selector("#notice[data-kind=error]:has-text('Invalid text')")
    assert len(page.input_value("#message")) == 33_000

    # The server goes away: the send fails readably and loses nothing; back, it goes on.
    port = server.port
    server.stop()
    turn = send(page, "are you there?")
    page.wait_for_selector("#notice[data-kind=error]:has-text('Cannot reach the API')")
    assert page.input_value("#message") == "are you there?"
    shots.take("server-away")
    server.start(port=port)
    page.focus("#message")
    page.keyboard.press("Enter")
    wait_status(page, "completed", turn)
    assert "You said: are you there?" in last_turn(page).inner_text()
    assert page.input_value("#message") == ""

    # The start limit: the 8th start within the minute is a 429 with its retry time.
    turn = send(page, "hello")
    wait_status(page, "completed", turn)
    send(page, "hello again")
    page.wait_for_selector("#notice[data-kind=error]:has-text('Too many turns')")
    assert "Try again in" in page.inner_text("#notice")
    assert page.input_value("#message") == "hello again"

    # A phone-width screen: one column, nothing wider than the screen.
    page.set_viewport_size({"width": 360, "height": 800})
    page.evaluate("() => document.getElementById('session').scrollIntoView()")
    shots.take("phone")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 360
    critical = axe_critical(page)
    assert not critical, critical
    page.set_viewport_size({"width": 1280, "height": 860})

    # Delete, confirmed in a dialog: the session is gone from the list.
    page.click("#delete-session")
    page.wait_for_selector("#confirm-delete[open]")
    shots.take("confirm-delete")
    page.click("#confirm-delete button[value=delete]")
    page.wait_for_selector("#notice:has-text('deleted')")
    page.wait_for_selector("#welcome:not([hidden])")
    page.wait_for_selector("#session-list [data-session]", state="detached")
    assert page.locator("#session-list [data-session]").count() == 0
    shots.take("deleted")
    assert not errors, errors
    assert all("dev-alice" not in url for url in requests)  # the token never in a URL
    print("screenshots:", target, ", ".join(shots.names))


def test_the_stream_follower_applies_frames_deltas_and_entries_per_the_contract(
    server: RealServer, browser: Pages
) -> None:
    """The SSE path of the page against the stream route's contract (docs/api.md): a fetch()
    body split at awkward places, `offset` rewrites, the entry superseding the bubble, the
    token only in the Authorization header, a cut stream resumed with `?cursor=`."""
    page = browser.new_page()
    page.goto(server.url + "/console/js/api.js")  # any page of the origin loads the modules
    outcome = page.evaluate(STREAM_CONTRACT, [_sse(STREAM_EVENTS), _sse(RESUMED_EVENTS)])
    assert outcome["urls"][0].endswith("/sessions/s-1/turns/op-1/stream")
    assert outcome["urls"][1].endswith("/sessions/s-1/turns/op-1/stream?cursor=11")
    assert all("tok" not in url for url in outcome["urls"])
    assert outcome["auth"] == ["Bearer tok", "Bearer tok"]
    # Each painted state of the bubble, in order: frame, delta, rewrite at offset 0, delta.
    assert outcome["texts"] == ["Hel", "Hello", "Hi", "Hi there", "Hi there, Rex."]
    assert outcome["final"] == "Hi there, Rex."
    assert outcome["provisional"] is False
    assert outcome["end"] == {
        "turn_id": "op-1",
        "status": "completed",
        "error": None,
        "rounds": 1,
        "usage": {"input_tokens": 5, "output_tokens": 4},
    }
    assert outcome["events"] == [10, 11, 12]  # the replayed seq 11 is not applied twice


STREAM_EVENTS_END: dict[str, Any] = {
    "turn_id": "op-1",
    "status": "completed",
    "error": None,
    "rounds": 1,
    "usage": {"input_tokens": 5, "output_tokens": 4},
}


def _text_frame(seq: int, text: str, offset: int = 0) -> dict[str, Any]:
    """A frame event of response `op-1:r0` carrying `text` at `offset` (the events contract)."""
    return {
        "seq": seq,
        "kind": "frame",
        "response_id": "op-1:r0",
        "round": 0,
        "offset": offset,
        "text": text,
        "deltas": [{"type": "text", "text": text}],
    }


def test_offsets_count_code_points_so_a_reply_with_an_emoji_streams_without_a_cut(
    server: RealServer, browser: Pages
) -> None:
    """The server counts `offset` in code points (docs/api.md, "Event stream"): a delta after
    an astral character (two UTF-16 units in JavaScript) continues the text exactly there."""
    emoji_events: list[tuple[str, str | None, dict[str, Any]]] = [
        ("frame", "11", _text_frame(11, "\U0001f408 Rex")),
        ("delta", None, {"response_id": "op-1:r0", "offset": 5, "text": " naps"}),
        ("delta", None, {"response_id": "op-1:r0", "offset": 9, "text": "s \U0001f634!"}),
        ("end", None, STREAM_EVENTS_END),
    ]
    page = browser.new_page()
    page.goto(server.url + "/console/js/api.js")
    outcome = page.evaluate(STREAM_CONTRACT, [_sse(emoji_events)])
    assert outcome["texts"] == [
        "\U0001f408 Rex",
        "\U0001f408 Rex naps",
        "\U0001f408 Rex naps \U0001f634!",
    ]


STREAM_EVENTS: list[tuple[str, str | None, dict[str, Any]]] = [
    (
        "entry",
        "10",
        {
            "seq": 10,
            "kind": "entry",
            "entry_id": "op-1:user",
            "role": "user",
            "parts": [{"kind": "text", "text": "hi"}],
        },
    ),
    ("frame", "11", _text_frame(11, "Hel")),
    ("delta", None, {"response_id": "op-1:r0", "offset": 3, "text": "lo"}),
    ("delta", None, {"response_id": "op-1:r0", "offset": 0, "text": "Hi"}),
]
RESUMED_EVENTS: list[tuple[str, str | None, dict[str, Any]]] = [
    ("frame", "11", STREAM_EVENTS[1][2]),  # a server may replay the cursor's neighbour
    ("delta", None, {"response_id": "op-1:r0", "offset": 2, "text": " there"}),
    (
        "entry",
        "12",
        {
            "seq": 12,
            "kind": "entry",
            "entry_id": "op-1:r0",
            "response_id": "op-1:r0",
            "role": "assistant",
            "parts": [{"kind": "text", "text": "Hi there, Rex."}],
        },
    ),
    ("end", None, STREAM_EVENTS_END),
]


def _sse(events: list[tuple[str, str | None, dict[str, Any]]]) -> str:
    text = ": ping\n\n"
    for name, ident, data in events:
        text += f"event: {name}\n" + (f"id: {ident}\n" if ident else "")
        text += f"data: {json.dumps(data)}\r\n\n"
    return text


STREAM_CONTRACT = """async (bodies) => {
  const { ApiClient } = await import("/console/js/api.js");
  const { followTurn } = await import("/console/js/follow.js");
  const { TurnView } = await import("/console/js/turnview.js");
  const urls = [], auth = [];
  const fetchImpl = async (url, init) => {
    if (new URL(url).pathname === "/live") {  // as `turnkeep serve` answers: it streams
      const live = JSON.stringify({ websocket_url: null, stream: true });
      return new Response(live, { status: 200, headers: { "Content-Type": "application/json" } });
    }
    urls.push(url);
    auth.push(init.headers.Authorization);
    const text = bodies.shift();
    // Cut the body every 7 characters: events and lines arrive split across reads.
    const stream = new ReadableStream({
      start(controller) {
        for (let i = 0; i < text.length; i += 7) {
          controller.enqueue(new TextEncoder().encode(text.slice(i, i + 7)));
        }
        controller.close();
      },
    });
    return new Response(stream, { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };
  const api = new ApiClient({ baseUrl: location.origin, token: "tok" }, { fetchImpl });
  const view = new TurnView("op-1", { api, sessionId: "s-1" });
  document.body.append(view.element);
  const texts = [], events = [];
  const record = () => {
    const node = view.element.querySelector('[data-response="op-1:r0"] .bubble-text');
    const text = node ? node.textContent : "";
    if (text && texts[texts.length - 1] !== text) texts.push(text);
  };
  const end = await followTurn(api, "s-1", "op-1", {
    onEvent: (event) => { events.push(event.seq); view.apply(event); record(); },
    onDelta: (delta) => { view.delta(delta); record(); },
  });
  const bubble = view.element.querySelector('[data-response="op-1:r0"]');
  return {
    urls, auth, texts, events, end,
    final: bubble.querySelector(".bubble-text").textContent,
    provisional: bubble.classList.contains("provisional"),
  };
}"""


@pytest.mark.parametrize(
    ("status", "code"), [(404, "not_found"), (501, "stream_unavailable")], ids=["404", "501"]
)
def test_without_a_stream_route_the_follower_polls_the_events_page_with_its_cursor(
    server: RealServer, status: int, code: str, browser: Pages
) -> None:
    """Where the stream route is missing (an older API: 404) or cannot stream (the Lambda
    host: 501), the page polls this real server's events page instead and says so."""
    page = browser.new_page()
    body = json.dumps({"error": {"code": code, "message": "no stream here"}})
    page.route(
        "**/turns/*/stream*",
        lambda route: route.fulfill(status=status, content_type="application/json", body=body),
    )
    connect(page, server, "bob")
    new_session(page, "polling")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.evaluate(WATCH_PAINTS)
    # Long enough (5 s) to span two recovery frames (persisted every 2 s by default).
    turn = send(page, "tell me " + " ".join(f"w{i}" for i in range(40)))
    wait_status(page, "completed", turn)
    assert "You said: tell me w0" in last_turn(page).inner_text()
    assert page.inner_text("#connection-state") == "live (polling)"
    replies = page.evaluate("() => window.__paints.replies")
    assert len(replies) >= 2, replies  # it came in as frames before the settled entry
    polled = [url for url in requests if "/events?" in url]
    assert polled
    assert "cursor=" in polled[-1]
    assert all("dev-bob" not in url for url in requests)


def test_a_turn_followed_while_the_server_is_killed_and_restarted_ends_with_its_reply_once(
    own_server: RealServer, browser: Pages
) -> None:
    """kill -9 mid-reply: the page says the server is unreachable and retries; the restarted
    server resumes the turn, and the page resumes from its cursor: the reply shows once."""
    words = " ".join(f"w{i}" for i in range(30))
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    connect(page, own_server, "carol")
    new_session(page, "restart")
    turn = send(page, f"tell me {words}")
    page.wait_for_selector(
        "#transcript .msg.assistant.provisional .bubble-text:has-text('w1')", timeout=TURN_MS
    )
    port = own_server.port
    own_server.kill9()
    page.wait_for_selector("#connection-state[data-state=offline]", timeout=TURN_MS)
    own_server.start(port=port)
    wait_status(page, "completed", turn)
    bubbles = last_turn(page).locator(".msg.assistant:not([hidden]) .bubble-text")
    assert bubbles.count() == 1
    assert bubbles.inner_text() == f"You said: tell me {words}"
    assert not errors, errors


def test_a_compacted_session_shows_its_summary_marked_live_and_after_a_reload(
    tmp_path: Path, browser: Pages
) -> None:
    """A small context window (`scripted?context=2500`): the fourth long turn compacts the
    older ones; the page marks the summary as such, also when the transcript is reloaded."""
    small = {"TURNKEEP_MODEL": "scripted?context=2500"}
    with serving(tmp_path / "small", small) as real:
        page = browser.new_page()
        connect(page, real, "dora")
        new_session(page, "long")
        for i in range(4):
            turn = send(page, f"turn {i} " + "lorem ipsum dolor " * 40)
            wait_status(page, "completed", turn)
        marked = page.locator("#transcript .compaction")
        marked.first.wait_for()
        assert "Compaction summary" in marked.first.inner_text()
        assert "Earlier conversation" in marked.first.inner_text()
        page.reload()
        page.locator("#session-list .session-button").first.click()
        page.wait_for_selector("#transcript .compaction")
        assert "Compaction summary" in page.locator("#transcript .compaction").first.inner_text()


DESCRIBE_ERRORS = """async () => {
  const { errorOf, describe, UnreachableError } = await import("/console/js/api.js");
  const answer = (status, code, message, extra = {}, headers = {}) =>
    new Response(JSON.stringify({ error: { code, message, ...extra } }), { status, headers });
  const errors = [
    await errorOf(answer(409, "turn_running", "session 's-1' has a turn in progress")),
    await errorOf(answer(429, "rate_limited", "too many", {}, { "Retry-After": "12" })),
    await errorOf(answer(404, "not_found", "session not found")),
    await errorOf(answer(422, "message_too_large", "text: 40000 bytes", { field: "text" })),
    await errorOf(new Response("<html>", { status: 502, statusText: "Bad Gateway" })),
    new UnreachableError("Cannot reach the API at http://x (it may be restarting)."),
  ];
  return errors.map(describe);
}"""


def test_api_errors_read_as_one_sentence_each(server: RealServer, browser: Pages) -> None:
    """409, 429 (with its Retry-After), 404, 422 (naming the field), a non-JSON gateway error
    and an unreachable server, as the page words them (api.js, `describe`)."""
    page = browser.new_page()
    page.goto(server.url + "/")
    lines = page.evaluate(DESCRIBE_ERRORS)
    assert lines == [
        "A turn is still running: session 's-1' has a turn in progress.",
        "Too many turns started in this session. Try again in 12 s.",
        "Not found: session not found.",
        "Invalid text: text: 40000 bytes.",
        "API error 502 http_error: Bad Gateway",
        "Cannot reach the API at http://x (it may be restarting).",
    ]


PLACE_ORDER = """async () => {
  const { TurnView } = await import("/console/js/turnview.js");
  const view = new TurnView("op-1", { api: null, sessionId: "s-1" });
  view.apply({ seq: 2, kind: "entry", entry_id: "op-1:user", role: "user",
               parts: [{ kind: "text", text: "call echo" }] });
  view.apply({ seq: 5, kind: "entry", entry_id: "op-1:r0", response_id: "op-1:r0",
               role: "assistant", parts: [{ kind: "tool_call", id: "c1", name: "echo",
               arguments: "{}" }] });
  // The next round's live text overtakes the commit of the result it follows.
  view.delta({ response_id: "op-1:r1", offset: 0, text: "Tool echo returned" });
  view.apply({ seq: 7, kind: "entry", entry_id: "op-1:r0:c1", role: "tool",
               parts: [{ kind: "tool_result", call_id: "c1", name: "echo", content: "ok" }] });
  view.apply({ seq: 9, kind: "entry", entry_id: "op-1:r1", response_id: "op-1:r1",
               role: "assistant", parts: [{ kind: "text", text: "Tool echo returned: ok" }] });
  return [...view.body.children].map((node) => node.className);
}"""


def test_a_tool_result_is_shown_before_the_reply_even_when_live_text_overtakes_it(
    server: RealServer, browser: Pages
) -> None:
    page = browser.new_page()
    page.goto(server.url + "/")
    classes = page.evaluate(PLACE_ORDER)
    assert [c.split()[0] for c in classes] == ["msg", "msg", "tool-result", "msg"]
    assert "user" in classes[0]
    assert classes[3] == "msg assistant"  # the settled reply, last


def test_older_sessions_pages_the_list_on_newest_first_until_the_last_page(
    server: RealServer, browser: Pages
) -> None:
    """23 sessions: the list shows the newest 20, "Older sessions" appends the other 3 (the
    next page by its cursor) and then hides; an older one opens from there and stays listed
    when a turn's end refreshes the list."""
    with api_client(server, "erin") as client:
        for i in range(23):
            assert client.post("/sessions", json={"title": f"s{i:02d}"}).status_code == 201
        newest = client.get("/sessions", params={"order": "newest"}).json()["sessions"]
    expected = [view["meta"]["title"] for view in newest]
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    connect(page, server, "erin")
    titles = page.locator("#session-list .session-title")
    page.wait_for_function(
        "() => document.querySelectorAll('#session-list .session-title').length === 20"
    )
    assert titles.all_inner_texts() == expected[:20]
    more = page.locator("#more-sessions")
    assert more.is_visible()
    more.click()
    page.wait_for_function(
        "() => document.querySelectorAll('#session-list .session-title').length === 23"
    )
    assert titles.all_inner_texts() == expected
    assert more.is_hidden()
    listed = [url for url in requests if "/sessions?" in url]
    assert len(listed) == 2
    assert "cursor=" not in listed[0]
    assert "order=newest" in listed[1]
    assert "cursor=" in listed[1]
    oldest = page.locator("#session-list .session-button", has_text=expected[-1])
    oldest.click()
    page.wait_for_selector(f"#session-title:has-text('{expected[-1]}')")
    # A turn's end refreshes the list (new nodes replace the marked ones): the older page
    # stays, and the open session with it.
    page.evaluate(
        "() => document.querySelectorAll('#session-list li')"
        ".forEach((node) => { node.dataset.stale = '1'; })"
    )
    turn = send(page, "hello")
    wait_status(page, "completed", turn)
    page.wait_for_selector("#session-list li[data-stale]", state="detached")
    assert titles.all_inner_texts() == expected
    assert oldest.get_attribute("aria-current") == "true"


def test_calls_waiting_in_other_sessions_are_approved_or_denied_from_the_pending_list(
    server: RealServer, browser: Pages
) -> None:
    """Two sessions wait on a gated call, neither open: one is approved from the pending list,
    the other denied there with a reason; both turns end accordingly and the list empties."""
    with api_client(server, "frank") as client:
        turns: dict[str, tuple[str, str]] = {}
        for name in ("ship", "drop"):
            sid = client.post("/sessions", json={"title": name}).json()["session_id"]
            assert client.put(f"/sessions/{sid}/meta", json={"toolApproval": "echo"}).is_success
            started = client.post(
                f"/sessions/{sid}/turns", json={"text": f'call echo {{"text": "{name}"}}'}
            )
            turns[name] = (sid, started.json()["turn_id"])
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        connect(page, server, "frank")
        cards = page.locator("#pending-list .pending-item")

        def card(name: str) -> Any:
            return cards.filter(has_text=turns[name][0]).locator(".approval")

        # Waiting calls show up on the 4 s refresh (or at once when already waiting).
        page.wait_for_function(
            "() => document.querySelectorAll('#pending-list .pending-item').length === 2",
            timeout=TURN_MS,
        )
        card("ship").locator("button", has_text="Approve").click()
        card("drop").locator("input").fill("not from here")
        card("drop").locator("button", has_text="Deny").click()
        page.wait_for_selector("#pending-list .pending-item", state="detached", timeout=TURN_MS)
        assert page.locator("#pending-list p.muted", has_text="Nothing waits").is_visible()
        ended = {name: _wait_ended(client, *ids) for name, ids in turns.items()}
        assert errors == []
    assert ended["ship"]["status"] == "completed"
    assert ended["drop"]["status"] == "completed"
    # The model got the approved call's result and the denial's reason as an error result.
    assert not ended["ship"]["result"].get("is_error")
    assert ended["drop"]["result"].get("is_error")
    assert "not from here" in ended["drop"]["result"]["content"]


def test_a_call_approved_from_the_pending_list_shows_as_approved_in_its_open_session(
    server: RealServer, browser: Pages
) -> None:
    """The same call has a card in the open session's turn and one in the pending list: the
    decision made in the list reaches the turn's card (its approval_decided event)."""
    page = browser.new_page()
    connect(page, server, "gina")
    new_session(page, "both")
    set_tool_approval(page, "echo")
    turn = send(page, 'call echo {"text": "from the list"}')
    in_turn = page.locator("#transcript .approval.pending")
    in_turn.wait_for(timeout=TURN_MS)
    listed = page.locator("#pending-list .approval.pending")
    listed.wait_for(timeout=TURN_MS)
    listed.locator("button", has_text="Approve").click()
    wait_status(page, "completed", turn)
    assert "from the list" in last_turn(page).locator(".tool-result").last.inner_text()
    card = last_turn(page).locator(".approval")
    assert card.get_attribute("data-decision") == "approve"
    assert "Approved" in card.inner_text()
    assert card.locator("button").count() == 0
    page.wait_for_selector("#pending-list .pending-item", state="detached", timeout=TURN_MS)


def _wait_ended(client: httpx.Client, sid: str, turn: str) -> dict[str, Any]:
    """Wait for the turn to end: its status and its (one) tool result part."""
    deadline = time.monotonic() + TURN_MS / 1000
    while True:
        view = client.get(f"/sessions/{sid}/turns/{turn}").json()
        if view["status"] not in ("running", "awaiting_approval", "cancelling"):
            break
        assert time.monotonic() < deadline, view
        time.sleep(0.1)
    page = client.get(f"/sessions/{sid}/turns/{turn}/events", params={"limit": 1000}).json()
    [result] = [
        part
        for event in page["events"]
        if event["kind"] == "entry"
        for part in event["parts"]
        if part["kind"] == "tool_result"
    ]
    return {"status": view["status"], "result": result}
