"""A watched turn, polling vs pushing: what it costs on AWS (moto) and how late the text arrives
(a real local server). The reply of issue #23: the scripted model at one word per 20 ms
(`scripted?delay_ms=20&words_per_frame=1`) answering a 500-word message (a ~10 s reply), after
100 prior messages.

(a) Under moto (bench/aws_requests.py's stack: the state machine executed by moto, every step
    and the API a cold Lambda in a fresh interpreter counting its botocore calls):
    - polling (today's design): frames every 250 ms (the template's old value), a watcher polling
      `GET .../events` with `turnkeep chat --url`'s cadence through a warm API Lambda;
    - pushing: recovery frames every 4 s (the template's value now), a watcher that connects
      (the `$connect` authorizer, cold), subscribes (LiveFunction, cold) and is pushed every
      event by the steps through the management API (a recorder on 127.0.0.1 stands in for it,
      moto's server does not route it); `$disconnect` after the turn, counted apart.
    Printed: DynamoDB + S3 requests of the turn and of the watcher, Step Functions requests and
    state transitions, management-API posts, Lambda invocations, pushes per 100 ms.
(b) Against a real local server (uvicorn on 127.0.0.1, the API app with the in-process hub):
    the latency from the model emitting a word to the client reading it, p50 / p95, polling the
    events page (frames every 50 ms, the old local default) vs the event stream.

    .venv/bin/python bench/watched_turn.py            # the figures above (a few minutes)
    .venv/bin/python bench/watched_turn.py --smoke    # 40 words, 6 prior messages (CI)
"""

from __future__ import annotations

import argparse
import http.server
import itertools
import json
import logging
import os
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aws_requests as aws
import httpx

ROOT = Path(__file__).resolve().parents[1]
SLOW = "scripted?delay_ms=20&words_per_frame=1"
TARGET_STORAGE = 30
TARGET_WATCHER_INVOCATIONS = 2
TARGET_P50_MS = 100.0


def _message(words: int) -> str:
    return " ".join(f"word{i}" for i in range(words))


# -- a stand-in for the management API and the issuer's JWKS -----------------------------------


@dataclass
class Recorder:
    """An HTTP server on 127.0.0.1: records management-API posts, serves a JWKS."""

    jwks: dict[str, Any]
    posts: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def start(self) -> None:
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                connection = self.path.rsplit("/@connections/", 1)[-1]
                with recorder.lock:
                    recorder.posts.append((connection, time.monotonic(), json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def do_GET(self) -> None:
                data = json.dumps(recorder.jwks).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{server.server_address[1]}"


def _token(issuer: str) -> tuple[str, dict[str, Any]]:
    """A JWT of the bench's user signed by a fresh key, and the JWKS that verifies it."""
    from joserfc import jwt
    from joserfc.jwk import KeySet, RSAKey

    key = RSAKey.generate_key(2048, parameters={"kid": "bench"})
    claims = {"iss": issuer, "aud": "bench-app", "sub": aws.USER, "exp": int(time.time()) + 3600}
    token = jwt.encode({"alg": "RS256", "kid": "bench"}, claims, key)
    return token, KeySet([key]).as_dict(private=False)


# -- (a) under moto ------------------------------------------------------------------------------


@dataclass
class Design:
    """One design's figures for the watched turn."""

    name: str
    turn_storage: int = 0
    watcher_storage: int = 0
    after_storage: int = 0
    step_functions: Counter[str] = field(default_factory=Counter)
    transitions: int = 0
    posts: int = 0
    delta_posts: int = 0
    max_deltas_per_100ms: int = 0
    max_posts_per_100ms: int = 0
    delta_gap_ms: tuple[float, float] = (0.0, 0.0)
    max_received_per_100ms: int = 0
    step_invocations: int = 0
    watcher_invocations: int = 0
    after_invocations: int = 0
    polls: int = 0
    seconds: float = 0.0
    breakdown: Counter[str] = field(default_factory=Counter)

    @property
    def storage(self) -> int:
        return self.turn_storage + self.watcher_storage


def _storage_calls(calls: Counter[str]) -> int:
    return sum(n for name, n in calls.items() if name.split(":")[0] in ("dynamodb", "s3"))


class _WarmCounter:
    """Counts the botocore calls of this process while `on` (the warm watcher Lambdas), but
    not those of the bench's own clients (`exclude`)."""

    def __init__(self) -> None:
        import botocore.client

        self.calls: Counter[str] = Counter()
        self.on = False
        self.exclude: set[int] = set()
        original = botocore.client.BaseClient._make_api_call
        counter = self

        def counted(client: Any, operation: str, params: Any) -> Any:
            service = client.meta.service_model.service_name
            # moto's Step Functions interpreter invokes the (cold) steps through Lambda: not
            # the watcher's calls.
            if counter.on and id(client) not in counter.exclude and service != "lambda":
                counter.calls[f"{client.meta.service_model.service_name}:{operation}"] += 1
            return original(client, operation, params)

        self._original = original
        botocore.client.BaseClient._make_api_call = counted  # type: ignore[method-assign]

    def close(self) -> None:
        import botocore.client

        botocore.client.BaseClient._make_api_call = self._original  # type: ignore[method-assign]


def _poll_watcher(api: Any, counter: _WarmCounter, sid: str, op_id: str, design: Design) -> None:
    """`turnkeep chat --url`'s polling loop, through a warm API Lambda (counted)."""
    from tests.support.lambda_host import FakeContext

    counter.on = True
    cursor, delay = 0, 0.05
    while True:
        event = aws._api_event(
            "GET", f"/sessions/{sid}/turns/{op_id}/events", query=f"cursor={cursor}&limit=200"
        )
        answer = api.handler(event, FakeContext(function_name="ApiFunction"))
        design.polls += 1
        page = json.loads(answer["body"])
        if answer["statusCode"] != 200:
            raise RuntimeError(f"events page answered {answer['statusCode']}: {page}")
        cursor = page["next_cursor"]
        if page["finished"]:
            break
        events = page["events"]
        time.sleep(delay if not events else 0.05)
        delay = 0.05 if events else min(delay * 2, 0.5)
    counter.on = False


def _point_ws(stack: Any, url: str) -> None:
    """The WebSocket endpoint of every function the template gives one (the steps, LiveFunction)
    set to `url` ("": as before the WebSocket API existed)."""
    for env in stack.cold.deployed.values():
        if "TURNKEEP_WS_ENDPOINT" in env:
            env["TURNKEEP_WS_ENDPOINT"] = url


def measure_aws(words: int, prior: int) -> list[Design]:
    """Both designs' figures for one watched turn each (see the module docstring)."""
    from moto.core.config import default_user_config
    from moto.server import ThreadedMotoServer

    from tests.support.lambda_host import FakeContext, load_function_module
    from turnkeep.aws_lambda import container

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    recorder = Recorder({})
    recorder.start()
    token, recorder.jwks = _token(recorder.url)
    saved = dict(os.environ)
    config_saved = json.dumps(default_user_config)
    default_user_config["lambda"]["use_docker"] = False
    default_user_config["stepfunctions"]["execute_state_machine"] = True
    env = {
        **os.environ,
        "MOTO_PORT": str(port),
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": aws.REGION,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "TURNKEEP_STORAGE_URL": (
            f"aws://?table={aws.TURN_TABLE}&bucket={aws.TURN_BUCKET}&prefix=tk"
        ),
        "TURNKEEP_ENVELOPE_URL": f"aws://?table={aws.TURN_TABLE}",
        "TURNKEEP_MODEL": SLOW,
        "TURNKEEP_WS_ENDPOINT": f"{recorder.url}/live",
        "TURNKEEP_JWT_ISSUER": recorder.url,
        "TURNKEEP_JWT_AUDIENCE": "bench-app",
        "TURNKEEP_JWKS_URL": f"{recorder.url}/jwks.json",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "turnkeep",
        "POWERTOOLS_SERVICE_NAME": "turnkeep",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT / "shared"),
    }
    os.environ.update(env)
    designs: list[Design] = []
    counter = _WarmCounter()
    try:
        stack = aws._deploy(endpoint, env)
        # Over the template's environment: the slow model, this bench's issuer and JWKS.
        stack.cold.overrides.update(
            {k: env[k] for k in ("TURNKEEP_MODEL", "TURNKEEP_JWT_ISSUER", "TURNKEEP_JWT_AUDIENCE")}
        )
        stack.cold.overrides["TURNKEEP_JWKS_URL"] = env["TURNKEEP_JWKS_URL"]
        os.environ["TURNKEEP_STATE_MACHINE_ARN"] = stack.machine_arn
        counter.exclude.add(id(stack.sfn))
        live = str(ROOT / "functions" / "live" / "app.py")
        stack.cold.handlers["LiveFunction"] = (live, "routes")
        text = _message(words)
        with aws.cold_lambda_backend(stack.cold):
            sid = f"watched-{uuid.uuid4().hex[:8]}"
            os.environ["TURNKEEP_MODEL"] = "scripted"  # seeding: fast replies
            container.reset_runtime()
            aws._seed(sid, prior)
            os.environ["TURNKEEP_MODEL"] = SLOW
            container.reset_runtime()
            api = load_function_module("api")

            # Polling: today's frame cadence, the events page polled by a warm API Lambda.
            design = Design("polling (today)")
            stack.cold.overrides["TURNKEEP_FRAME_INTERVAL_MS"] = "250"
            _point_ws(stack, "")
            mark = len(stack.cold.invocations)
            started = time.monotonic()
            op_id = aws._api(stack, "POST", f"/sessions/{sid}/turns", {"text": text})["turn_id"]
            failures: list[BaseException] = []

            def poll() -> None:
                try:
                    _poll_watcher(api, counter, sid, op_id, design)
                except BaseException as exc:  # re-raised below: a bench never hides a failure
                    failures.append(exc)

            watcher = threading.Thread(target=poll)
            watcher.start()
            design.transitions = aws.wait_execution(stack, op_id)
            watcher.join()
            if failures:
                raise failures[0]
            design.seconds = time.monotonic() - started
            _account(design, stack.cold.invocations[mark:])
            design.watcher_storage = _storage_calls(counter.calls)
            design.breakdown.update({f"watcher {k}": v for k, v in counter.calls.items()})
            design.watcher_invocations = design.polls
            designs.append(design)
            aws._forget_moto_model_copies()

            # Pushing: recovery frames every 4 s, deltas pushed over the WebSocket API.
            design = Design("pushing")
            stack.cold.overrides["TURNKEEP_FRAME_INTERVAL_MS"] = "4000"
            _point_ws(stack, f"{recorder.url}/live")
            connection = f"conn-{uuid.uuid4().hex[:8]}"
            mark = len(stack.cold.invocations)
            started = time.monotonic()
            op_id = aws._api(stack, "POST", f"/sessions/{sid}/turns", {"text": text})["turn_id"]
            # The watcher's two invocations, warm like the polling watcher's API Lambda: the
            # $connect authorizer, then subscribe (LiveFunction), both counted.
            counter.calls.clear()
            counter.on = True
            try:
                live_app = load_function_module("live")
                # The CLI's connect: the JWT in the header (a JWT in the URL is refused).
                connect = {"type": "REQUEST", "methodArn": "arn:bench"}
                connect["headers"] = {"Authorization": f"Bearer {token}"}
                allowed = live_app.authorize_connect(connect, FakeContext("LiveAuthorizer"))
                assert allowed["principalId"] == aws.USER
                body = json.dumps({"action": "subscribe", "session_id": sid, "turn_id": op_id})
                context = {"routeKey": "subscribe", "connectionId": connection}
                context["authorizer"] = {"principalId": aws.USER, "sub": aws.USER}
                live_app.routes({"requestContext": context, "body": body}, FakeContext("Live"))
            finally:
                counter.on = False
            design.watcher_invocations = 2
            design.watcher_storage = _storage_calls(counter.calls)
            design.breakdown.update({f"watcher {k}": v for k, v in counter.calls.items()})
            design.transitions = aws.wait_execution(stack, op_id)
            design.seconds = time.monotonic() - started
            _account(design, stack.cold.invocations[mark:])
            after = len(stack.cold.invocations)
            disconnect = {"requestContext": {"routeKey": "$disconnect", "connectionId": connection}}
            stack.cold.invoke("LiveFunction", disconnect)
            for inv in stack.cold.invocations[after:]:
                design.after_storage += _storage_calls(inv.calls)
                design.after_invocations += 1
            mine = [(t, m) for c, t, m in recorder.posts if c == connection]
            design.posts = len(mine)
            design.delta_posts = sum(1 for _, m in mine if m["event"] == "delta")
            # The cadence as the steps sent it (received, network jitter bunches pushes).
            sent = sorted(p for inv in stack.cold.invocations[mark:] for p in inv.pushes)
            deltas = [t for t, kind in sent if kind == "delta"]
            design.max_deltas_per_100ms = _most_in_100ms(deltas)
            design.max_posts_per_100ms = _most_in_100ms([t for t, _ in sent])
            gaps = [b - a for a, b in itertools.pairwise(deltas)]
            design.delta_gap_ms = (
                (statistics.median(gaps) * 1000, min(gaps) * 1000) if gaps else (0.0, 0.0)
            )
            received = [t for t, m in mine if m["event"] == "delta"]
            design.max_received_per_100ms = _most_in_100ms(received)
            designs.append(design)
    finally:
        counter.close()
        container.reset_runtime()
        os.environ.clear()
        os.environ.update(saved)
        default_user_config.update(json.loads(config_saved))
        server.stop()
    return designs


def _most_in_100ms(times: list[float]) -> int:
    return max((sum(1 for u in times if t <= u < t + 0.1) for t in times), default=0)


def _account(design: Design, invocations: list[aws.Invocation]) -> None:
    """Add the turn's cold invocations (API start and steps) to `design`."""
    for inv in invocations:
        design.turn_storage += _storage_calls(inv.calls)
        design.step_invocations += 1
        for name, n in inv.calls.items():
            service = name.split(":")[0]
            if service == "stepfunctions":
                design.step_functions[name.split(":")[1]] += n
            if service == "apigatewaymanagementapi":
                design.posts += 0  # counted from the recorder (what each connection received)
            design.breakdown[f"{inv.function} {name}"] += n


def print_aws(designs: list[Design], words: int, prior: int) -> None:
    """The side-by-side table of (a)."""
    poll, push = designs
    print(
        f"(a) one watched turn under moto: a {words + 2}-word reply at 20 ms a word after "
        f"{prior} prior messages; cold Lambdas; polling = frames every 250 ms + events-page "
        "polls (warm API Lambda), pushing = frames every 4 s + WebSocket pushes"
    )
    rows = [
        ("reply streamed (s)", f"{poll.seconds:.1f}", f"{push.seconds:.1f}", ""),
        ("DynamoDB+S3: turn (API start + steps)", poll.turn_storage, push.turn_storage, ""),
        ("DynamoDB+S3: watcher", poll.watcher_storage, push.watcher_storage, ""),
        ("DynamoDB+S3: in all", poll.storage, push.storage, f"<= {TARGET_STORAGE}"),
        (
            "Step Functions requests (API)",
            sum(poll.step_functions.values()),
            sum(push.step_functions.values()),
            "",
        ),
        ("state transitions", poll.transitions, push.transitions, ""),
        ("Lambda invocations: turn", poll.step_invocations, push.step_invocations, ""),
        (
            "Lambda invocations: watcher",
            poll.watcher_invocations,
            push.watcher_invocations,
            f"<= {TARGET_WATCHER_INVOCATIONS}",
        ),
        ("events-page polls", poll.polls, 0, ""),
        ("management-API posts (all / deltas)", "-", f"{push.posts} / {push.delta_posts}", ""),
        ("delta pushes sent in any 100 ms (max)", "-", push.max_deltas_per_100ms, "<= 1"),
        ("any pushes sent in any 100 ms (max)", "-", push.max_posts_per_100ms, ""),
        ("delta pushes received in any 100 ms (max)", "-", push.max_received_per_100ms, ""),
        (
            "delta gap as sent, median / min (ms)",
            "-",
            f"{push.delta_gap_ms[0]:.0f} / {push.delta_gap_ms[1]:.0f}",
            "",
        ),
        (
            "after the turn: $disconnect (inv. / DynamoDB)",
            "-",
            f"{push.after_invocations} / {push.after_storage}",
            "",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'':<{width}}  {'polling (today)':>16}  {'pushing':>14}  target")
    for name, a, b, target in rows:
        print(f"{name:<{width}}  {a!s:>16}  {b!s:>14}  {target}")
    met = (
        push.storage <= TARGET_STORAGE
        and push.watcher_invocations <= TARGET_WATCHER_INVOCATIONS
        and push.max_deltas_per_100ms <= 1
    )
    ratio = poll.storage / push.storage if push.storage else float("inf")
    print(
        f"pushing: {push.storage} DynamoDB+S3 requests vs {poll.storage} polling "
        f"({ratio:.1f}x fewer); targets {'met' if met else 'NOT met'}"
    )
    for design in designs:
        top = ", ".join(
            f"{k} {v}"
            for k, v in sorted(design.breakdown.items())
            if k.split(" ", 1)[1].split(":")[0] in ("dynamodb", "s3") or k.startswith("watcher")
        )
        print(f"  {design.name}: {top}")


# -- (b) against a real local server -------------------------------------------------------------


class _Timed:
    """The scripted model, recording when each text piece was emitted (end offset -> time)."""

    def __init__(self) -> None:
        from turnkeep.providers.scripted import ScriptedProvider

        base = ScriptedProvider(words_per_frame=1, frame_delay=0.02)
        self.emitted: dict[str, dict[int, float]] = {}
        timed = self

        class Provider(type(base)):  # type: ignore[misc]
            def stream(self, request: Any) -> Any:
                from turnkeep.providers.base import TextDelta

                chars = 0
                marks: dict[int, float] = {}
                timed.emitted[str(len(timed.emitted))] = marks
                for event in super().stream(request):
                    if isinstance(event, TextDelta):
                        chars += len(event.text)
                        marks[chars] = time.monotonic()
                    yield event

        self.provider = Provider(words_per_frame=1, frame_delay=0.02)


def _serve(frame_interval_ms: int, timed: _Timed, tmp: Path) -> tuple[str, Any]:
    import uvicorn

    from turnkeep.api import ApiSettings, LocalDevAuthenticator, LocalLauncher, create_app
    from turnkeep.api.hub import LiveHub
    from turnkeep.api.serve import bind
    from turnkeep.runtime.build import build_runtime
    from turnkeep.runtime.settings import TurnkeepSettings

    settings = TurnkeepSettings(local_dir=tmp, frame_interval_ms=frame_interval_ms)
    runtime = build_runtime(settings, provider=timed.provider)
    runtime.deps.live = LiveHub()
    launcher = LocalLauncher(runtime.deps)
    app = create_app(runtime, launcher, LocalDevAuthenticator(), settings=ApiSettings())
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.01)

    def stop() -> None:
        server.should_exit = True
        launcher.shutdown(wait=True)
        runtime.close()

    return f"http://127.0.0.1:{sock.getsockname()[1]}", stop


def _latencies(marks: dict[int, float], reads: list[tuple[float, int, int]]) -> list[float]:
    """Per emitted piece: first read time of its last character minus its emit time (ms)."""
    out: list[float] = []
    seen: set[int] = set()
    for at, start, end in reads:
        for offset, emitted in marks.items():
            if start < offset <= end and offset not in seen:
                seen.add(offset)
                out.append((at - emitted) * 1000)
    return out


def _one_local(streaming: bool, frames_ms: int, words: int, tmp: Path) -> tuple[list[float], int]:
    """Latencies (ms) of one turn and the requests the client made to follow it."""
    from turnkeep.cli.sse import read_sse

    timed = _Timed()
    url, stop = _serve(frames_ms, timed, tmp)
    reads: list[tuple[float, int, int]] = []
    requests = 0
    try:
        with httpx.Client(
            base_url=url, headers={"Authorization": "Bearer dev-bench"}, timeout=60
        ) as client:
            sid = client.post("/sessions", json={}).json()["session_id"]
            turn = client.post(f"/sessions/{sid}/turns", json={"text": _message(words)}).json()
            path = f"/sessions/{sid}/turns/{turn['turn_id']}"
            if streaming:
                requests = 1
                with client.stream("GET", f"{path}/stream") as answer:
                    for event in read_sse(answer.iter_lines()):
                        if event.kind in ("delta", "frame"):
                            data = event.data
                            end = data["offset"] + len(data["text"])
                            reads.append((time.monotonic(), data["offset"], end))
            else:
                cursor, delay = 0, 0.05
                while True:
                    page = client.get(
                        f"{path}/events", params={"cursor": cursor, "limit": 200}
                    ).json()
                    requests += 1
                    now = time.monotonic()
                    for event in page["events"]:
                        if event["kind"] == "frame":
                            end = event["offset"] + len(event["text"])
                            reads.append((now, event["offset"], end))
                    cursor = page["next_cursor"]
                    if page["finished"]:
                        break
                    time.sleep(0.05 if page["events"] else delay)
                    delay = 0.05 if page["events"] else min(delay * 2, 0.5)
    finally:
        stop()
    [marks] = list(timed.emitted.values())
    return _latencies(marks, reads), requests


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def measure_local(words: int, runs: int, tmp: Path) -> None:
    """(b): p50 / p95 emit-to-read latency, polling vs streaming (median of `runs` runs)."""
    print()
    print(
        f"(b) a real local server (uvicorn on 127.0.0.1, SQLite): a {words + 2}-word reply at "
        f"20 ms a word; latency from the model emitting a word to the client reading it; "
        f"median of {runs} run(s)"
    )
    results: dict[str, tuple[float, float, int]] = {}
    designs = (
        ("polling (frames 50 ms)", False, 50),
        ("polling (frames 250 ms)", False, 250),
        ("streaming (SSE)", True, 2000),
    )
    for index, (name, streaming, frames_ms) in enumerate(designs):
        p50s, p95s, counts = [], [], []
        for run in range(runs):
            lat, requests = _one_local(streaming, frames_ms, words, tmp / f"{index}-{run}")
            p50s.append(_pct(lat, 0.5))
            p95s.append(_pct(lat, 0.95))
            counts.append(requests)
        results[name] = (
            statistics.median(p50s),
            statistics.median(p95s),
            int(statistics.median(counts)),
        )
    print(f"{'':<24} {'p50 ms':>8} {'p95 ms':>8} {'requests':>9}")
    for name, (p50, p95, requests) in results.items():
        print(f"{name:<24} {p50:>8.1f} {p95:>8.1f} {requests:>9}")
    print("(frames 50 ms: the old local default; 250 ms: the template's old value)")
    poll = results["polling (frames 50 ms)"]
    sse = results["streaming (SSE)"]
    print(
        f"streaming p50 {sse[0]:.1f} ms vs polling {poll[0]:.1f} ms "
        f"({poll[0] / sse[0]:.1f}x sooner); target p50 <= {TARGET_P50_MS:g} ms "
        f"{'met' if sse[0] <= TARGET_P50_MS else 'NOT met'}"
    )


def main() -> None:
    """Print (a), then (b)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="40 words, 6 prior messages")
    parser.add_argument("--no-aws", action="store_true", help="only (b), the local latency")
    args = parser.parse_args()
    words, prior, runs = (40, 6, 1) if args.smoke else (500, 100, 3)
    if not args.no_aws:
        print_aws(measure_aws(words, prior), words, prior)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="watched-") as tmp:
        measure_local(words, runs, Path(tmp))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
