"""`turnkeep chat --url`: the terminal chat as a client of the HTTP API (contract: docs/api.md).

At the start the chat asks the API where turns are followed live (`GET /live`): a turn is
`POST /sessions/{id}/turns`, then a `subscribe` on the deployment's WebSocket API (the URL
`GET /live` names, or `--ws-url` / `TURNKEEP_WS_URL`: the same events as messages, the whole
turn long) or, where the server streams, its event stream `GET .../turns/{turn}/stream`
(Server-Sent Events: live deltas, frames, entries, the end). Where it does neither, the socket
cannot be opened, or either breaks, the chat polls
`GET .../turns/{turn}/events?cursor=` with each page's `next_cursor` until `finished`, with a
bounded backoff while pages come back empty. `TurnEventRenderer` turns those events
into printer calls so every piece of text is shown once: deltas and frames (provisional, of the
running round) print their new text as it arrives, and the round's settled entry prints only
what they had not shown yet.

httpx is imported lazily: `turnkeep demo` and the in-process chat do not need it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from turnkeep.cli.event_renderer import ChatOutput, TurnEventRenderer
from turnkeep.cli.result_block import result_block
from turnkeep.cli.usage_line import usage_text

if TYPE_CHECKING:
    import httpx

    from turnkeep.cli.approvals import Ask

CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0
POLL_MIN_S = 0.05
POLL_MAX_S = 0.5
DEFAULT_TURN_WALL_S = 600.0
PAGE_LIMIT = 200
LISTING_WAIT_S = 10.0
"""How long a seen approval request may take to be listed by `GET /approvals`."""
_BODY_SHOWN = 300


class ApiUnreachableError(Exception):
    """The API could not be reached or did not answer; the chat cannot go on."""


@dataclass(frozen=True)
class RemoteApiError(Exception):
    """An error answer of the API: `{"error": {"code", "message"}}` plus `Retry-After`."""

    status: int
    code: str
    message: str
    retry_after: str | None = None

    def __str__(self) -> str:
        text = f"API error {self.status} {self.code}: {self.message}"
        if self.retry_after is not None:
            text += f" (retry after {self.retry_after} s)"
        return text


def check_url(url: str) -> str:
    """The API base URL without a trailing slash; ValueError naming it unless http(s)://host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--url must be an http:// or https:// URL with a host, got {url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"--url must not carry a query or fragment, got {url!r}")
    return url.rstrip("/")


def status_line(turn_id: str, view: Mapping[str, Any]) -> str:
    """`[turn <id>: <status>, N model rounds, X in / Y out tokens(, error: ...)]`."""
    rounds = int(view.get("rounds") or 0)
    raw_usage = view.get("usage")
    usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    text = f"[turn {turn_id}: {view.get('status')}, "
    text += f"{rounds} model round{'' if rounds == 1 else 's'}"
    text += ", " + usage_text(
        int(usage.get("input_tokens") or 0),
        int(usage.get("output_tokens") or 0),
        int(usage.get("cache_read_tokens") or 0),
        estimated=bool(usage.get("estimated")),
    )
    error = view.get("error")
    return text + (f", error: {error}]" if error else "]")


class RemoteChat:
    """One chat session on the API: `open_session`, then `turn(text)` and `notes()` per line.

    Error answers raise `RemoteApiError`; transport failures and timeouts raise
    `ApiUnreachableError`. `sleep` and `clock` are injectable so polling is testable.
    """

    def __init__(
        self,
        client: httpx.Client,
        output: ChatOutput,
        *,
        turn_wall_s: float = DEFAULT_TURN_WALL_S,
        model: str | None = None,
        ws_url: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if turn_wall_s <= 0:
            raise ValueError(f"turn wall time must be > 0 seconds, got {turn_wall_s}")
        self.client = client
        self.output = output
        self.turn_wall_s = turn_wall_s
        self.model = model
        self.sleep = sleep
        self.clock = clock
        self.session_id: str | None = None
        self.current_turn: str | None = None
        """The turn being followed now (what Ctrl-C cancels)."""
        self.ask: Ask | None = None
        """Asks the person about a call that waits for approval (None: only say it waits)."""
        self.streams: bool | None = None
        """Whether the server streams turns (None: not known yet; False: poll)."""
        self.ws_url = ws_url
        """The deployment's WebSocket API (None: follow on the SSE route or poll)."""

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """The JSON object of a 2xx answer (`{}` when empty); RemoteApiError otherwise."""
        import httpx

        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise ApiUnreachableError(
                f"the API at {self.client.base_url} did not answer in time ({type(exc).__name__})"
            ) from None
        except httpx.TransportError as exc:
            raise ApiUnreachableError(
                f"cannot reach the API at {self.client.base_url}: {type(exc).__name__}: {exc}"
            ) from None
        if not response.is_success:
            raise _api_error(response)
        if not response.content:
            return {}
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise RemoteApiError(
                response.status_code,
                "unexpected_answer",
                f"{method} {path} answered {response.headers.get('content-type', 'no type')!r}"
                ", not a JSON object: is --url the turnkeep API?",
            )
        return body

    def _session_path(self) -> str:
        if self.session_id is None:
            raise RuntimeError("open_session() first")
        return f"/sessions/{quote(self.session_id, safe='')}"

    def open_session(self, session_id: str | None) -> str:
        """Reuse `session_id` if the caller owns it, else create it (a new id when None)."""
        if session_id is not None:
            try:
                self._call("GET", f"/sessions/{quote(session_id, safe='')}")
            except RemoteApiError as exc:
                if exc.status != 404:
                    raise
            else:
                self.session_id = session_id
                return session_id
        body: dict[str, str] = {"title": "turnkeep chat"}
        if session_id is not None:
            body["session_id"] = session_id
        created = self._call("POST", "/sessions", json=body)
        self.session_id = _required(created, "session_id", "POST /sessions")
        return self.session_id

    def discover_live(self) -> str | None:
        """Ask the API where turns are followed live (`GET /live`, docs/api.md): its WebSocket
        URL becomes `ws_url` unless one was given, and `streams` says whether the stream route
        answers (never probed where it cannot); returns `ws_url`. An API without the route
        (404/405: an older one) leaves both as they were: the stream route is tried."""
        from turnkeep.cli.ws import check_ws_url

        try:
            live = self._call("GET", "/live")
        except RemoteApiError as exc:
            if exc.status in (404, 405):
                return self.ws_url
            raise
        self.streams = live.get("stream") is True
        url = live.get("websocket_url")
        if self.ws_url is None and isinstance(url, str):
            try:
                self.ws_url = check_ws_url(url, "GET /live's websocket_url")
            except ValueError as exc:
                self.output.notice(f"[{exc}; polling]")
        return self.ws_url

    def require_approval(self, tools: str) -> None:
        """Set the session's `toolApproval` host key, keeping its other host keys."""
        view = self._call("GET", self._session_path())
        meta = view.get("meta")
        merged = dict(meta) if isinstance(meta, dict) else {}
        merged["toolApproval"] = tools
        self._call("PUT", f"{self._session_path()}/meta", json=merged)

    def notes(self) -> str | None:
        """The session's working notes (None when there are none)."""
        notes = self._call("GET", f"{self._session_path()}/notes").get("notes")
        return notes if isinstance(notes, str) else None

    def turn(self, text: str, attachments: Sequence[str] = ()) -> str | None:
        """Run one turn (with the ids of ready `attachments`) and print it; returns its final
        status (None if not seen to end)."""
        payload: dict[str, Any] = {"text": text}
        if attachments:
            payload["attachments"] = list(attachments)
        if self.model is not None:
            payload["model"] = self.model
        started = self._call("POST", f"{self._session_path()}/turns", json=payload)
        return self.follow(_required(started, "turn_id", "POST .../turns"))

    def _turn_path(self, turn_id: str) -> str:
        return f"{self._session_path()}/turns/{quote(turn_id, safe='')}"

    def running_turn(self) -> str | None:
        """The session's running (or cancelling) turn, if any."""
        view = self._call("GET", self._session_path())
        turn = view.get("turn")
        if not isinstance(turn, dict) or turn.get("status") not in (
            "running",
            "cancelling",
            "awaiting_approval",
        ):
            return None
        turn_id = turn.get("turn_id")
        return turn_id if isinstance(turn_id, str) else None

    def cancel(self, turn_id: str) -> str:
        """Ask the server to cancel `turn_id`; what it answered, as words."""
        body = self._call("POST", f"{self._turn_path(turn_id)}/cancel")
        if body.get("cancel_requested"):
            return f"cancel of turn {turn_id} requested; the server stops it at its next step"
        return f"turn {turn_id} had already ended ({body.get('status')})"

    def follow(self, turn_id: str) -> str | None:
        """Print `turn_id`'s events until it ends; its final status (None if not seen to end)."""
        self.current_turn = turn_id
        status = self._follow(turn_id)
        # Kept when interrupted: the caller's Ctrl-C handler cancels `current_turn`.
        self.current_turn = None
        return status

    def _follow(self, turn_id: str) -> str | None:
        renderer = TurnEventRenderer(self.output)
        deadline = self.clock() + self.turn_wall_s
        if self.ws_url is not None:
            from turnkeep.cli.ws import follow_on_socket

            followed = follow_on_socket(self, self.ws_url, turn_id, renderer, deadline)
            if not isinstance(followed, NoStream):
                return followed
        elif self.streams is not False:
            streamed = self._stream(turn_id, renderer, deadline)
            if not isinstance(streamed, NoStream):
                return streamed
        return self._poll(turn_id, renderer, deadline)

    def on_live(
        self,
        turn_id: str,
        renderer: TurnEventRenderer,
        kind: str,
        seq: int | str | None,
        data: Any,
    ) -> Ended | None:
        """One event of a live stream (SSE or WebSocket: the same kinds and data); `Ended`
        with the turn's final status once nothing more is to be read."""
        event: Mapping[str, Any] = data if isinstance(data, dict) else {}
        if kind == "delta":
            renderer.on_delta(event)
        elif kind == "end":
            renderer.finish()
            if event.get("output") is not None:
                self.output.notice(result_block(event["output"]))
            self.output.notice(status_line(turn_id, event))
            return Ended(str(event.get("status")))
        elif kind == "status":
            renderer.waiting = event.get("status") == "awaiting_approval"
        elif seq is not None:
            renderer.on_event(event)
        return None

    def ask_approvals(self, turn_id: str, renderer: TurnEventRenderer) -> Ended | None:
        """Ask about the calls `renderer` saw requested and not decided (their entries were
        shown: the request follows its call in seq order); `Ended` when no one can answer."""
        renderer.finish()
        if not self._answer_approvals(turn_id, wait_listed=True):
            return Ended("awaiting_approval")
        renderer.waiting = False
        renderer.undecided.clear()
        return None

    def gave_up(self, turn_id: str, renderer: TurnEventRenderer) -> None:
        """Say the turn outlived the chat's wall time (it may still run on the server)."""
        renderer.finish()
        self.output.notice(
            f"[turn {turn_id} did not finish within {self.turn_wall_s:g} s; "
            "stopped waiting, it may still run on the server]"
        )

    def _stream(
        self, turn_id: str, renderer: TurnEventRenderer, deadline: float
    ) -> str | NoStream | None:
        """Follow the turn on its event stream; `NoStream` when the caller must poll."""
        import httpx

        from turnkeep.cli.sse import read_sse

        path = f"{self._turn_path(turn_id)}/stream"
        try:
            with self.client.stream(
                "GET",
                path,
                params={"cursor": renderer.resume_cursor()},
                headers={"Accept": "text/event-stream"},
            ) as answer:
                if answer.status_code in (404, 405, 501):
                    answer.read()
                    if answer.status_code != 404:
                        self.streams = False  # this server never streams: poll from now on
                    return NoStream()
                if not answer.is_success:
                    answer.read()
                    raise _api_error(answer)
                self.streams = True
                for event in read_sse(answer.iter_lines()):
                    ended = self.on_live(turn_id, renderer, event.kind, event.id, event.data)
                    if ended is None and renderer.waiting and renderer.undecided:
                        # Both known: the turn waits and its requests were shown. A catch-up
                        # sends the status first: asking on it printed `??` before the call.
                        ended = self.ask_approvals(turn_id, renderer)
                    if ended is not None:
                        return ended.status
                    if self.clock() > deadline:
                        self.gave_up(turn_id, renderer)
                        return None
        except RemoteApiError as exc:
            renderer.finish()
            self.output.notice(f"[stopped following turn {turn_id}: {exc}]")
            return None
        except httpx.TransportError:
            pass  # the stream broke (or timed out): the events page has the rest
        return NoStream()

    def _poll(self, turn_id: str, renderer: TurnEventRenderer, deadline: float) -> str | None:
        events_path = f"{self._turn_path(turn_id)}/events"
        cursor = renderer.resume_cursor()
        delay = POLL_MIN_S
        while True:
            try:
                page = self._call(
                    "GET", events_path, params={"cursor": cursor, "limit": PAGE_LIMIT}
                )
            except RemoteApiError as exc:
                renderer.finish()
                self.output.notice(f"[stopped following turn {turn_id}: {exc}]")
                return None
            raw_events = page.get("events")
            events = raw_events if isinstance(raw_events, list) else []
            for event in events:
                if isinstance(event, dict):
                    renderer.on_event(event)
            next_cursor = page.get("next_cursor")
            if isinstance(next_cursor, (int, str)) and not isinstance(next_cursor, bool):
                cursor = next_cursor
            if page.get("finished"):
                break
            if page.get("status") == "awaiting_approval" and not events:
                renderer.finish()
                if not self._answer_approvals(turn_id):
                    return "awaiting_approval"
                deadline = self.clock() + self.turn_wall_s  # time with the person not counted
                continue
            remaining = deadline - self.clock()
            if remaining <= 0:
                renderer.finish()
                self.output.notice(
                    f"[turn {turn_id} did not finish within {self.turn_wall_s:g} s; stopped "
                    f"waiting, it may still run on the server]"
                )
                return None
            if len(events) >= PAGE_LIMIT:
                continue  # a full page: more is waiting now
            # New events: the turn is producing, look again soon; none: back off, bounded.
            if events:
                delay = POLL_MIN_S
            self.sleep(min(delay, remaining))
            if not events:
                delay = min(delay * 2, POLL_MAX_S)
        renderer.finish()
        try:
            view = self._call("GET", self._turn_path(turn_id))
        except RemoteApiError:
            view = {"status": page.get("status")}  # the page's status still says how it ended
        if view.get("output") is not None:
            self.output.notice(result_block(view["output"]))
        self.output.notice(status_line(turn_id, view))
        return str(view.get("status"))

    def _pending(self, turn_id: str, wait_listed: bool) -> list[dict[str, Any]]:
        """The turn's pending approvals (`GET /approvals`). `wait_listed`: a request was seen
        whose turn may not say `awaiting_approval` yet (the status follows the request's
        commit), so an empty list is read again, with backoff, for up to `LISTING_WAIT_S`."""
        give_up = self.clock() + (LISTING_WAIT_S if wait_listed else 0.0)
        delay = POLL_MIN_S
        while True:
            listed = self._call("GET", "/approvals").get("approvals")
            pending = [
                p
                for p in (listed if isinstance(listed, list) else [])
                if isinstance(p, dict) and p.get("turn_id") == turn_id
            ]
            if pending or self.clock() >= give_up:
                return pending  # none after the wait: decided elsewhere (the console)
            self.sleep(delay)
            delay = min(delay * 2, POLL_MAX_S)

    def _answer_approvals(self, turn_id: str, *, wait_listed: bool = False) -> bool:
        """Ask about the turn's pending approvals and send the answers (False: no one to ask)."""
        pending = self._pending(turn_id, wait_listed)
        if self.ask is None:
            names = ", ".join(str(p.get("tool")) for p in pending)
            self.output.notice(f"[turn {turn_id} waits for an approval of: {names}]")
            return False
        for item in pending:
            path = (
                f"{self._turn_path(turn_id)}/approvals/{quote(str(item.get('call_id')), safe='')}"
            )
            while True:
                answer = self.ask(str(item.get("tool")), json.dumps(item.get("arguments")))
                body: dict[str, Any] = {"decision": answer.decision}
                if answer.reason is not None:
                    body["reason"] = answer.reason
                if answer.arguments is not None:
                    body["arguments"] = answer.arguments
                try:
                    self._call("POST", path, json=body)
                except RemoteApiError as exc:
                    self.output.notice(f"[{exc}]")
                    if exc.status == 422:
                        continue
                break
        return True


class NoStream:
    """The turn could not be followed on a stream (none offered, or it broke): poll."""


@dataclass(frozen=True)
class Ended:
    """A live stream said the turn is over (or waits for an approval no one can give)."""

    status: str


def _required(body: Mapping[str, Any], name: str, what: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise RemoteApiError(200, "unexpected_answer", f"{what} answered without {name!r}")
    return value


def _api_error(response: httpx.Response) -> RemoteApiError:
    """The API's error body; a body of another shape (a gateway's) is named, not swallowed."""
    retry_after = response.headers.get("Retry-After")
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return RemoteApiError(
            response.status_code,
            str(error.get("code", "error")),
            str(error.get("message", "")),
            retry_after,
        )
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        message = body["message"]  # API Gateway's own answers, e.g. {"message": "Unauthorized"}
    else:
        raw = response.text
        more = len(raw) - _BODY_SHOWN
        message = raw[:_BODY_SHOWN] + (f"... (+{more} more characters)" if more > 0 else "")
    return RemoteApiError(
        response.status_code, f"http_{response.status_code}", message, retry_after
    )


def url_hint(client: httpx.Client, error: RemoteApiError) -> str | None:
    """A hint when an answer says --url is not the API's base URL (404/405 on its routes).

    Probes `/openapi.json` there and one level up: the turnkeep API serves `/sessions` at its
    root, so `http://host:8787/api` is wrong when `http://host:8787` is the API.
    """
    if error.status not in (404, 405):
        return None
    base = str(client.base_url).rstrip("/")
    if _is_turnkeep(client, f"{base}/openapi.json"):
        return None  # the URL is right; the 404 is about the session itself
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    if path:
        parent = f"{parts.scheme}://{parts.netloc}{path.rsplit('/', 1)[0]}"
        if _is_turnkeep(client, f"{parent}/openapi.json"):
            return f"--url {base} looks wrong: the turnkeep API answers at {parent}"
    return (
        f"--url {base} looks wrong: no turnkeep API answers there ({base}/openapi.json does not "
        "describe /sessions); pass the API's base URL, e.g. http://127.0.0.1:8787"
    )


def _is_turnkeep(client: httpx.Client, url: str) -> bool:
    import httpx

    try:
        response = client.get(url)
        schema = response.json() if response.is_success else None
    except (httpx.HTTPError, ValueError):
        return False
    paths = schema.get("paths") if isinstance(schema, dict) else None
    return isinstance(paths, dict) and "/sessions" in paths


def open_client(url: str, *, token: str | None, user: str) -> httpx.Client:
    """An httpx client of the API at `url`: bearer `token`, else the local dev token of `user`."""
    try:
        import httpx
    except ImportError:  # pragma: no cover - depends on the installation
        raise ApiUnreachableError(
            "the remote chat needs httpx: pip install 'turnkeep[api]' (or httpx)"
        ) from None
    bearer = token if token is not None else f"dev-{user}"
    return httpx.Client(
        base_url=check_url(url),
        headers={"Authorization": f"Bearer {bearer}", "Accept": "application/json"},
        timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
    )
