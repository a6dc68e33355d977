"""turnkeep's overhead per model round and per turn against a real model server (issue #30).

For the same prompts: a raw streaming Chat Completions request to `llama-server` (SmolLM2-135M,
prepared by tools/real_model/prepare.py), the same round as a turn through turnkeep on SQLite
with the in-process orchestrator, and through the turn state machine executed by moto (DynamoDB
+ S3 under moto, every step a hosted Lambda handler). Prints per round and per turn the
overhead over the raw request (p50/p95 ms), and the time to first text delta against the
server's own. Every request asks for exactly the same number of tokens (`ignore_eos`) with the
prompt cache off, so raw and turnkeep rounds generate the same work.

`--smoke` (CI): a few prompts; when the real server is not prepared it runs against the
project's OpenAI-compatible test server (tests/support/openai_server.py) instead and says so —
then the figures are turnkeep's own cost over a server that answers at once, not a model's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.openai_server import ChatServer, Reply, text_chunks, usage_chunk  # noqa: E402
from tests.support.state_machine import deploy  # noqa: E402
from tools.real_model import prepare  # noqa: E402
from tools.real_model.server import LlamaServer  # noqa: E402
from turnkeep.aws_lambda import container  # noqa: E402
from turnkeep.envelope import open_envelope_store  # noqa: E402
from turnkeep.harness import HarnessDeps, StartTurnInput, orchestrator, run_turn, start_turn  # noqa: E402
from turnkeep.harness import steps as harness_steps  # noqa: E402
from turnkeep.providers.base import StreamEvent, TextDelta  # noqa: E402
from turnkeep.providers.factory import provider_from_config  # noqa: E402
from turnkeep.storage import open_storage  # noqa: E402

TOKENS = 32
SETTINGS = f'max_tokens={TOKENS}&temperature=0&extra={{"cache_prompt":false,"ignore_eos":true}}'
USER = "bench-user"
PROMPTS = [
    "Tell me one fact about the ocean.",
    "Name a colour and say why you like it.",
    "What is a good name for a cat?",
    "Describe a tree in one sentence.",
    "Say something kind about mornings.",
    "Why do birds sing?",
    "Give me a tip for learning to cook.",
    "What does a lighthouse do?",
]


@dataclass
class Timing:
    """One measured request or turn: wall time and time to the first text delta (seconds)."""

    total: float
    first_delta: float


@dataclass
class Runs:
    raw: list[Timing] = field(default_factory=list)
    local_rounds: list[float] = field(default_factory=list)
    local_turns: list[Timing] = field(default_factory=list)
    sfn_rounds: list[float] = field(default_factory=list)
    sfn_turns: list[float] = field(default_factory=list)


def raw_round(client: httpx.Client, url: str, body: dict[str, Any]) -> Timing:
    """POST the body turnkeep sent, streamed, to the server directly (a pooled client, as
    turnkeep's is)."""
    started = time.perf_counter()
    first = 0.0
    with client.stream("POST", f"{url}/chat/completions", json=body) as answer:
        answer.raise_for_status()
        for line in answer.iter_lines():
            if not first and line.startswith("data: {") and '"content":"' in line.replace(" ", ""):
                first = time.perf_counter() - started
    return Timing(time.perf_counter() - started, first)


@contextmanager
def timed_model_step(into: Callable[[], list[float]]) -> Iterator[None]:
    """Time every model step the in-process orchestrator runs."""
    original = harness_steps.model_step

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            into().append(time.perf_counter() - started)

    orchestrator.model_step = timed  # type: ignore[attr-defined]
    try:
        yield
    finally:
        orchestrator.model_step = original  # type: ignore[attr-defined]


def local_turns(spec: str, base_url: str, prompts: list[str], runs: Runs) -> None:
    """Each prompt as one turn on SQLite (in-process orchestrator), then its raw request."""
    bodies: list[dict[str, Any]] = []
    client = httpx.Client(
        event_hooks={"request": [lambda r: bodies.append(json.loads(r.read()))]}, timeout=120
    )
    plain = httpx.Client(timeout=120)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        keeper = open_storage(url, "keeper")  # kept open, as local mode does (WAL checkpoints)
        envelopes = open_envelope_store(f"sqlite:///{tmp}/envelopes.db")
        deps = HarnessDeps(
            open_storage=lambda sid: open_storage(url, sid),
            envelopes=envelopes,
            provider=provider_from_config(spec, http_client=client),
        )
        rounds: list[float] = []
        with timed_model_step(lambda: rounds):
            for index, prompt in enumerate(["Hello!", *prompts]):  # the first one warms up
                session = f"bench-{uuid.uuid4().hex[:8]}"
                envelopes.create(session, USER)
                first: list[float] = []
                started = time.perf_counter()

                def on_event(
                    event: StreamEvent, first: list[float] = first, started: float = started
                ) -> None:
                    if isinstance(event, TextDelta) and event.text and not first:
                        first.append(time.perf_counter() - started)

                result = run_turn(deps, session, USER, prompt, on_event=on_event)
                total = time.perf_counter() - started
                if result.status != "completed":
                    raise RuntimeError(f"turn ended {result.status}: {result.error}")
                raw = raw_round(plain, base_url, bodies[-1])
                if index:
                    runs.local_turns.append(Timing(total, first[0] if first else total))
                    runs.local_rounds.append(rounds[-1])
                    runs.raw.append(raw)
        envelopes.close()
        keeper.close()
    client.close()
    plain.close()


def sfn_turns(spec: str, prompts: list[str], runs: Runs) -> None:
    """Each prompt as one turn through the state machine under moto (STANDARD workflow)."""
    with (
        pytest.MonkeyPatch.context() as patch,
        deploy(patch, "STANDARD", TURNKEEP_MODEL=spec) as stack,
    ):
        model = stack.host.handlers["ModelStepFunction"]

        def timed(event: Any, context: Any) -> Any:
            started = time.perf_counter()
            try:
                return model(event, context)
            finally:
                runs.sfn_rounds.append(time.perf_counter() - started)

        stack.host.handlers["ModelStepFunction"] = timed
        # Frames as deployed (every 4 s; the test stack writes one per event), no metric lines.
        patch.setenv("TURNKEEP_FRAME_INTERVAL_MS", "4000")
        patch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
        container.reset_runtime()
        deps = container.runtime().deps
        for index, prompt in enumerate(["Hello!", *prompts]):
            session, op_id = f"sfn-{uuid.uuid4().hex[:8]}", f"op-{uuid.uuid4().hex[:12]}"
            deps.envelopes.create(session, USER)
            started = time.perf_counter()
            start_turn(
                deps,
                StartTurnInput(
                    session_id=session, op_id=op_id, user_id=USER, text=prompt, model=spec
                ),
            )
            arn = stack.sfn.start_execution(
                stateMachineArn=stack.state_machine_arn,
                name=op_id,
                input=json.dumps({"session_id": session, "op_id": op_id, "round": 0}),
            )["executionArn"]
            while (status := stack.sfn.describe_execution(executionArn=arn)["status"]) == "RUNNING":
                time.sleep(0.005)
            if status != "SUCCEEDED":
                raise RuntimeError(f"execution {op_id} ended {status}")
            if index:
                runs.sfn_turns.append(time.perf_counter() - started)
            else:
                runs.sfn_rounds.clear()  # the warm-up's


def _ms(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms"


def report(runs: Runs, target: str) -> None:
    raw = [r.total for r in runs.raw]
    raw_first = [r.first_delta for r in runs.raw]
    print(f"real_model_overhead: {len(raw)} prompts, {TOKENS} tokens each, against {target}")
    print(f"  raw streaming request          {_ms(raw)}")
    print(f"  raw time to first delta        {_ms(raw_first)}")
    pairs = {
        "local round (SQLite)": [a - b for a, b in zip(runs.local_rounds, raw, strict=False)],
        "local turn (SQLite)": [t.total - b for t, b in zip(runs.local_turns, raw, strict=False)],
        "state machine round (moto)": [a - b for a, b in zip(runs.sfn_rounds, raw, strict=False)],
        "state machine turn (moto)": [a - b for a, b in zip(runs.sfn_turns, raw, strict=False)],
        "local first delta": [
            t.first_delta - r.first_delta for t, r in zip(runs.local_turns, runs.raw, strict=False)
        ],
    }
    print("  overhead over the raw request (turnkeep minus raw, same prompt):")
    for label, values in pairs.items():
        print(f"    {label:<28} {_ms(values)}")
    ratio = statistics.median(t.total for t in runs.local_turns) / statistics.median(raw)
    print(f"  local turn / raw request (medians): {ratio:.2f}x")


def target_server(smoke: bool) -> tuple[AbstractContextManager[Any], str, str]:
    """(context that runs the server, base URL with /v1, what it is)."""
    server, model = prepare.server_path(), prepare.model_path()
    if server.is_file() and model.is_file():
        log = Path(tempfile.gettempdir()) / f"real-model-bench-{uuid.uuid4().hex[:6]}.log"
        llama = LlamaServer(server, model, log_path=log)
        llama.start()
        return _stopping(llama), f"{llama.url}/v1", "llama-server (SmolLM2-135M-Instruct, 1 thread)"
    if not smoke:
        raise SystemExit(
            f"real_model_overhead: {server} or {model} missing: run `make test-real-model` first"
        )
    chat = ChatServer(responder=_fake_reply)
    chat.__enter__()
    return (
        _closing(chat),
        chat.base_url,
        "the test server tests/support/openai_server.py (NOT a model)",
    )


@contextmanager
def _stopping(llama: LlamaServer) -> Iterator[None]:
    try:
        yield
    finally:
        llama.stop()


@contextmanager
def _closing(chat: ChatServer) -> Iterator[None]:
    try:
        yield
    finally:
        chat.__exit__()


def _fake_reply(body: dict[str, Any]) -> Reply:
    """TOKENS one-word deltas, a stop, usage: the shape llama-server streams."""
    events: list[dict[str, Any] | str] = list(text_chunks(*(["word "] * TOKENS)))
    events[-1]["choices"][0]["finish_reason"] = "stop"
    return Reply([*events, usage_chunk(100, TOKENS), "[DONE]"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="3 prompts (CI)")
    parser.add_argument("--repeat", type=int, default=3, help="times each prompt runs")
    args = parser.parse_args()
    prompts = PROMPTS[:3] if args.smoke else PROMPTS * args.repeat
    running, base_url, target = target_server(args.smoke)
    runs = Runs()
    with running:
        spec = f"openai:{base_url}#smollm2?{SETTINGS}"
        local_turns(spec, base_url, prompts, runs)
        sfn_turns(spec, prompts, runs)
    report(runs, target)


if __name__ == "__main__":
    main()
