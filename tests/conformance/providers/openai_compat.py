"""The OpenAI-compatible provider in the provider conformance suite: httpx against a real
Chat Completions server on 127.0.0.1 (tests/support/openai_server.py) answering as OpenAI and
llama.cpp's `llama-server` do, the scripted model behind it."""

from __future__ import annotations

from typing import Any

from tests.conformance.providers import Failure, ProviderHarness, Wire
from tests.support.openai_server import ChatServer, Reply, neutral_request, sse_reply
from turnkeep.providers.base import Usage
from turnkeep.providers.openai_compat import OpenAICompatProvider
from turnkeep.providers.scripted import ScriptedProvider

# Each failure as real servers send it: OpenAI's error objects, llama-server's context error
# (ggml-org/llama.cpp#15780), a connection cut inside the chunked stream.
_FAILURES: dict[Failure, Reply] = {
    "throttled": Reply(
        status=429,
        json_body={"error": {"message": "Rate limit reached", "type": "requests"}},
    ),
    "unavailable": Reply(
        status=503,
        json_body={"error": {"message": "The server is overloaded", "type": "server_error"}},
    ),
    "auth": Reply(
        status=401,
        json_body={"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}},
    ),
    "context_overflow": Reply(
        status=400,
        json_body={
            "error": {
                "code": 400,
                "message": "request (9000 tokens) exceeds the available context size "
                "(8192 tokens), try increasing it",
                "type": "exceed_context_size_error",
            }
        },
    ),
}


class _Behaviour:
    """The server's answers: a queued failure, else the scripted model's reply."""

    def __init__(self) -> None:
        self.failure: Failure | None = None
        self.usage: Usage | None = None
        self.pace = 0.0

    def __call__(self, body: dict[str, Any]) -> Reply:
        failure, self.failure = self.failure, None
        if failure is not None and failure != "dropped":
            return _FAILURES[failure]
        events = list(ScriptedProvider().stream(neutral_request(body)))
        reply = sse_reply(events, self.usage)
        self.usage = None
        reply.pace_seconds, self.pace = self.pace, 0.0
        if failure == "dropped":
            reply.drop_after = 3
        return reply

    def fail(self, failure: Failure) -> None:
        self.failure = failure

    def report(self, usage: Usage) -> None:
        self.usage = usage

    def slow(self, seconds: float) -> None:
        self.pace = seconds


def make() -> ProviderHarness:
    behaviour = _Behaviour()
    server = ChatServer(responder=behaviour).__enter__()
    wire = Wire(
        received=lambda: [neutral_request(r.body) for r in server.requests],
        fail_next=behaviour.fail,
        report_next=behaviour.report,
        pace_next=behaviour.slow,
        client_gone=server.client_gone.wait,
    )
    provider = OpenAICompatProvider(server.base_url, "conformance-model", timeout=10)
    return ProviderHarness("openai_compat", provider, wire, close=server.__exit__)
