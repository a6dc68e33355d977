"""The OpenAI-compatible provider in the provider conformance suite: httpx against a real
Chat Completions server on 127.0.0.1 (tests/support/openai_server.py) answering as OpenAI and
llama.cpp's `llama-server` do, the scripted model behind it."""

from __future__ import annotations

from typing import Any

from tests.conformance.providers import Failure, NextAnswer, ProviderHarness
from tests.support.openai_server import ChatServer, Reply, neutral_request, sse_reply
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


class _Behaviour(NextAnswer):
    """The server's answers: a queued failure, else the scripted model's reply."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        failure, usage, pace = self.take()
        if failure is not None and failure != "dropped":
            return _FAILURES[failure]
        reply = sse_reply(list(ScriptedProvider().stream(neutral_request(body))), usage)
        reply.pace_seconds = pace
        if failure == "dropped":
            reply.drop_after = 3
        return reply


def make() -> ProviderHarness:
    behaviour = _Behaviour()
    server = ChatServer(responder=behaviour).__enter__()
    wire = behaviour.wire(
        lambda: [neutral_request(r.body) for r in server.requests], server.client_gone.wait
    )
    provider = OpenAICompatProvider(server.base_url, "conformance-model", timeout=10)
    return ProviderHarness("openai_compat", provider, wire, close=server.__exit__)
