"""The Bedrock provider in the provider conformance suite: a real botocore client against the
Converse wire server on 127.0.0.1 (tests/support/bedrock_wire.py: botocore's own event-stream
frames, every request validated against botocore's service model), the scripted model behind."""

from __future__ import annotations

import boto3
from botocore.config import Config

from tests.conformance.providers import Failure, NextAnswer, ProviderHarness
from tests.support.bedrock_wire import (
    Answer,
    BedrockWire,
    Received,
    neutral_request,
    stream_frames,
)
from turnkeep.providers.base import ResponseDone
from turnkeep.providers.bedrock import BedrockProvider
from turnkeep.providers.scripted import ScriptedProvider

CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"

# Each failure as Bedrock sends it: the error type header and message of its HTTP errors (the
# overflow message as Claude on Bedrock words it), or a stream cut inside a frame.
_FAILURES: dict[Failure, Answer] = {
    "throttled": Answer(
        status=429, error_type="ThrottlingException", error_message="Too many requests"
    ),
    "unavailable": Answer(
        status=503,
        error_type="ServiceUnavailableException",
        error_message="Bedrock is unable to process your request.",
    ),
    "auth": Answer(
        status=403,
        error_type="AccessDeniedException",
        error_message="You don't have access to the model with the specified model ID.",
    ),
    "context_overflow": Answer(
        status=400,
        error_type="ValidationException",
        error_message="The model returned the following errors: input length and `max_tokens` "
        "exceed context limit: 195000 + 8192 > 200000, decrease input length or `max_tokens` "
        "and try again",
    ),
}


class _Behaviour(NextAnswer):
    """The server's answers: a queued failure, else the scripted model's reply as frames."""

    def __call__(self, received: Received) -> Answer:
        failure, usage, pace = self.take()
        if failure is not None and failure != "dropped":
            return _FAILURES[failure]
        done = list(ScriptedProvider().stream(neutral_request(received.body)))[-1]
        assert isinstance(done, ResponseDone)
        response = done.response
        if usage is not None:
            response = type(response)(response.message, response.stop_reason, usage)
        answer = Answer(stream_frames(response))
        answer.pace_seconds = pace
        if failure == "dropped":
            answer.drop_after = 3
        return answer


def make() -> ProviderHarness:
    behaviour = _Behaviour()
    server = BedrockWire(responder=behaviour).__enter__()
    client = boto3.client(
        "bedrock-runtime",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )
    wire = behaviour.wire(
        lambda: [neutral_request(r.body) for r in server.received], server.client_gone.wait
    )
    return ProviderHarness("bedrock", BedrockProvider(CLAUDE, client), wire, close=server.__exit__)
