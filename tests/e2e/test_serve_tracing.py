"""`turnkeep serve` with OTEL_EXPORTER_OTLP_ENDPOINT set exports each turn as one trace of
GenAI spans to a real OTLP/HTTP receiver on 127.0.0.1 (docs/tracing.md)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver
from tests.support.real_server import RealServer

USER = {"Authorization": "Bearer dev-erin"}


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as running:
        yield running


@pytest.fixture
def server(tmp_path: Path, receiver: OtlpReceiver) -> Iterator[str]:
    real = RealServer(
        tmp_path / "data",
        command=[sys.executable, "-m", "turnkeep.cli", "serve"],
        extra_env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # the batch leaves soon after the turn
            "OTEL_SERVICE_NAME": "turnkeep-serve",
        },
    )
    url = real.start()
    try:
        yield url
    finally:
        real.stop()
        errors = "".join(real.stderr)
        assert "Traceback" not in errors, errors


def _finish(client: httpx.Client, sid: str, text: str) -> str:
    started = client.post(f"/sessions/{sid}/turns", json={"text": text})
    assert started.status_code == 202, started.text
    turn = str(started.json()["turn_id"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = client.get(f"/sessions/{sid}/turns/{turn}").json()
        if status["status"] not in ("running", "cancelling"):
            assert status["status"] == "completed", status
            return turn
        time.sleep(0.05)
    pytest.fail(f"turn {turn} did not finish")


def test_a_served_turn_arrives_at_the_otlp_receiver_as_one_trace(
    server: str, receiver: OtlpReceiver
) -> None:
    with httpx.Client(base_url=server, headers=USER, timeout=30) as client:
        sid = client.post("/sessions", json={"title": "traced"}).json()["session_id"]
        turn = _finish(client, sid, 'call calculator {"expression": "6*7"}')

    spans = receiver.trace_of(turn)
    spans = receiver.wait_for(lambda got: sum(s.trace_id == spans[0].trace_id for s in got) >= 4)
    trace = [s for s in spans if s.trace_id == spans[0].trace_id]
    root = next(s for s in trace if s.name.startswith("invoke_agent"))
    assert root.attributes["gen_ai.conversation.id"] == sid
    assert root.service == "turnkeep-serve"
    children = [s for s in trace if s is not root]
    assert sorted(s.name.split(" ")[0] for s in children) == ["chat", "chat", "execute_tool"]
    assert all(s.parent_span_id == root.span_id for s in children)
    assert all(root.start_ns <= s.start_ns <= s.end_ns <= root.end_ns for s in children)
    tool = next(s for s in children if s.name.startswith("execute_tool"))
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
