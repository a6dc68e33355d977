"""Bedrock `s3Location` sources (docs/attachments.md, "S3 sources"): on the DynamoDB+S3 backend
a turn to a model family that takes S3 sources (Amazon Nova Lite/Pro/Premier) names the
attachment's object under the session's prefix instead of sending its bytes; every other model,
and the `bytes` setting, get the bytes as before. The Bedrock wire-level server validates each
request against botocore's service model and reads each `s3Location` from moto's S3 the way
Bedrock does (the object must exist, in the request's region, of the named owner)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws

from tests.support.attachment_samples import PDF_BYTES, png_bytes
from tests.support.aws_template import create_bucket, create_table
from tests.support.bedrock_wire import (
    Answer,
    BedrockWire,
    Received,
    converse_body,
    decoded,
    stream_frames,
)
from turnkeep import Agent, Image, tool
from turnkeep.attachments import AttachmentStore
from turnkeep.envelope import MemoryEnvelopeStore
from turnkeep.harness import HarnessDeps, HarnessLimits, run_turn
from turnkeep.harness.attachment_context import S3Sources, with_attachment_bytes
from turnkeep.harness.context import ContextPlan, PreparedRound
from turnkeep.harness.io import AttachmentRef, TurnResult
from turnkeep.harness.state import load_head
from turnkeep.harness.transcript import entry_message
from turnkeep.providers.attachment_budget import UNKNOWN_IMAGE_TOKENS, attachment_tokens
from turnkeep.providers.base import AttachmentPart, Message, ModelRequest, TextPart
from turnkeep.providers.bedrock import BedrockProvider
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage.aws import AwsRepository

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account: it owns the buckets made here
NOVA = "amazon.nova-lite-v1:0"
NOVA_PROFILE = "us.amazon.nova-pro-v1:0"
CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"
USER = "s3-user"
PNG = png_bytes(40, 30)


def _answer(received: Received) -> Answer:
    # The scripted model describes the bytes the server resolved (name, type, size, sha256).
    response = ScriptedProvider().complete(received.request())
    if received.operation == "Converse":
        return Answer(json_body=converse_body(response))
    return Answer(stream_frames(response))


@dataclass
class Aws:
    s3: Any
    repo: AwsRepository
    bucket: str


@pytest.fixture
def aws() -> Iterator[Aws]:
    with mock_aws():
        name = f"s3src-{uuid.uuid4().hex[:10]}"
        s3 = boto3.client("s3", region_name=REGION)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        create_table(dynamodb, name)
        create_bucket(s3, name)
        yield Aws(s3, AwsRepository(name, name, "tk", dynamodb_client=dynamodb, s3_client=s3), name)


@pytest.fixture
def wire(aws: Aws) -> Iterator[BedrockWire]:
    with BedrockWire(responder=_answer, s3=aws.s3, account=ACCOUNT) as running:
        yield running


def _bedrock(wire: BedrockWire, model_id: str, region: str = REGION) -> BedrockProvider:
    client = boto3.client(
        "bedrock-runtime",
        endpoint_url=wire.url,
        region_name=region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )
    return BedrockProvider(model_id, client)


class Session:
    """One session on the aws backend with a PNG and a PDF uploaded and checked."""

    def __init__(self, aws: Aws, provider: BedrockProvider, **limits: Any) -> None:
        self.aws = aws
        self.session_id = f"s-{uuid.uuid4().hex[:10]}"
        self.envelopes = MemoryEnvelopeStore()
        self.envelopes.create(self.session_id, USER, {})
        self.deps = HarnessDeps(
            open_storage=aws.repo.open,
            envelopes=self.envelopes,
            provider=provider,
            limits=HarnessLimits(**limits),
        )
        self.refs = [self.upload("shot.png", "image/png", PNG)]
        self.refs.append(self.upload("contract.pdf", "application/pdf", PDF_BYTES))

    def upload(self, name: str, media_type: str, data: bytes) -> AttachmentRef:
        storage = self.aws.repo.open(self.session_id)
        try:
            store = AttachmentStore(storage)
            digest = hashlib.sha256(data).hexdigest()
            record = store.create(name=name, media_type=media_type, size=len(data), sha256=digest)
            store.receive(record.id, data)
        finally:
            storage.close()
        return AttachmentRef(
            attachment_id=record.id, name=name, media_type=media_type, size=len(data)
        )

    def key(self, ref: AttachmentRef) -> str:
        return f"tk/sessions/{self.session_id}/attachments/{ref.attachment_id}"

    def turn(self, text: str = "what are these?") -> TurnResult:
        op = f"op-{uuid.uuid4().hex[:12]}"
        return run_turn(self.deps, self.session_id, USER, text, op_id=op, attachments=self.refs)

    def reply(self) -> str:
        storage = self.aws.repo.open(self.session_id)
        try:
            head = load_head(storage)
            assert head is not None
            messages = [entry_message(e) for e in storage.scan_branch(head)]
        finally:
            storage.close()
        return [m for m in messages if m is not None and m.role == "assistant"][-1].text


def _sources(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = body["messages"][0]["content"]
    return [b[k]["source"] for b in content for k in ("image", "document") if k in b]


def _described(name: str, media_type: str, data: bytes) -> str:
    sha = hashlib.sha256(data).hexdigest()[:12]
    return f"Attached: {name} ({media_type}, {len(data)} bytes, sha256 {sha})"


def test_a_nova_turn_names_the_attachments_s3_objects_and_bedrock_reads_their_bytes(
    aws: Aws, wire: BedrockWire
) -> None:
    session = Session(aws, _bedrock(wire, NOVA), attachment_bucket_owner=ACCOUNT)

    result = session.turn()

    assert result.status == "completed", result.error
    assert wire.invalid == []
    image, document = _sources(wire.bodies[0])
    bucket = aws.bucket
    assert image == {
        "s3Location": {
            "uri": f"s3://{bucket}/{session.key(session.refs[0])}",
            "bucketOwner": ACCOUNT,
        }
    }
    assert document == {
        "s3Location": {
            "uri": f"s3://{bucket}/{session.key(session.refs[1])}",
            "bucketOwner": ACCOUNT,
        }
    }
    # The server read the objects: the model describes the exact bytes (an image carries no
    # name on the wire, a document its Converse name).
    reply = session.reply()
    assert _described("image.png", "image/png", PNG) in reply
    assert _described("contract", "application/pdf", PDF_BYTES) in reply


def test_a_nova_inference_profile_without_a_known_owner_sends_the_uri_alone(
    aws: Aws, wire: BedrockWire
) -> None:
    session = Session(aws, _bedrock(wire, NOVA_PROFILE))

    assert session.turn().status == "completed"

    assert wire.invalid == []
    assert [set(s["s3Location"]) for s in _sources(wire.bodies[0])] == [{"uri"}, {"uri"}]


def test_a_claude_turn_on_the_same_backend_sends_the_bytes(aws: Aws, wire: BedrockWire) -> None:
    session = Session(aws, _bedrock(wire, CLAUDE), attachment_bucket_owner=ACCOUNT)

    assert session.turn().status == "completed"

    assert wire.invalid == []
    image, document = _sources(wire.bodies[0])
    assert decoded(image["bytes"]) == PNG
    assert decoded(document["bytes"]) == PDF_BYTES


def test_the_bytes_setting_sends_a_nova_turn_the_bytes(aws: Aws, wire: BedrockWire) -> None:
    session = Session(aws, _bedrock(wire, NOVA), attachment_source="bytes")

    assert session.turn().status == "completed"

    image, document = _sources(wire.bodies[0])
    assert decoded(image["bytes"]) == PNG
    assert decoded(document["bytes"]) == PDF_BYTES


def test_a_model_in_another_region_than_the_bucket_gets_the_bytes(
    aws: Aws, wire: BedrockWire
) -> None:
    # Bedrock reads S3 sources only from the request's region; the bucket is us-east-1's.
    session = Session(aws, _bedrock(wire, NOVA, region="us-west-2"))

    assert session.turn().status == "completed"

    assert wire.invalid == []
    assert all("bytes" in s for s in _sources(wire.bodies[0]))


def _prepared(*parts: AttachmentPart) -> PreparedRound:
    request = ModelRequest("", (Message("user", (TextPart("look"), *parts)),))
    return PreparedRound(request, ContextPlan("none", (), (), None, 0, 0))


@tool
def chart() -> list[str | Image]:
    """Draw the chart."""
    return ["the chart:", Image(PNG, "sales.png")]


def test_an_image_a_tool_returned_reaches_nova_as_its_s3_object_in_the_tool_result(
    aws: Aws, wire: BedrockWire
) -> None:
    session = Session(aws, _bedrock(wire, NOVA))
    session.deps.agent = Agent(tools=[chart])
    session.refs = []

    assert session.turn("call chart {}").status == "completed"

    assert wire.invalid == []
    result = wire.bodies[1]["messages"][2]["content"][0]["toolResult"]["content"]
    assert result[0] == {"text": "the chart:"}
    uri = result[1]["image"]["source"]["s3Location"]["uri"]
    assert uri.startswith(f"s3://{aws.bucket}/tk/sessions/{session.session_id}/attachments/att-")
    assert wire.received[1].resolved == {uri: PNG}


def _references(session: Session) -> list[AttachmentPart]:
    return [AttachmentPart(r.attachment_id, r.name, r.media_type, r.size) for r in session.refs]


def _sent_parts(prepared: PreparedRound) -> tuple[Any, ...]:
    return prepared.request.messages[0].parts[1:]


def test_an_attachment_deleted_since_it_was_sent_is_a_removed_note_not_a_dangling_uri(
    aws: Aws, wire: BedrockWire
) -> None:
    session = Session(aws, _bedrock(wire, NOVA))
    image, document = (
        AttachmentPart(r.attachment_id, r.name, r.media_type, r.size) for r in session.refs
    )
    storage = aws.repo.open(session.session_id)
    try:
        AttachmentStore(storage).delete(image.attachment_id)
        sent = _sent_parts(
            with_attachment_bytes(_prepared(image, document), storage, S3Sources(REGION))
        )
    finally:
        storage.close()

    assert sent[0] == TextPart("[attachment 'shot.png' (image/png) was removed]")
    assert sent[1].s3_uri == f"s3://{aws.bucket}/{session.key(session.refs[1])}"
    assert sent[1].data == b""


def test_the_context_budget_counts_an_s3_source_as_it_counts_the_bytes(
    aws: Aws, wire: BedrockWire
) -> None:
    session = Session(aws, _bedrock(wire, NOVA))
    refs = _references(session)
    storage = aws.repo.open(session.session_id)
    try:
        located = _sent_parts(with_attachment_bytes(_prepared(*refs), storage, S3Sources(REGION)))
        loaded = _sent_parts(with_attachment_bytes(_prepared(*refs), storage))
    finally:
        storage.close()

    assert located[0].s3_uri
    assert loaded[0].data == PNG
    # The image by the providers' formulas from the record's dimensions (not the 1,600 of an
    # unknown image); the PDF by the reference's size, as the harness's budget counts it.
    assert [attachment_tokens(p) for p in located] == [attachment_tokens(p) for p in loaded[:1]] + [
        attachment_tokens(refs[1])
    ]
    assert attachment_tokens(located[0]) != UNKNOWN_IMAGE_TOKENS


# -- the wire server models the rules Bedrock enforces on S3 sources ---------------------------


def _converse(
    wire: BedrockWire, model_id: str, source: dict[str, Any], region: str = REGION
) -> Any:
    client = _bedrock(wire, model_id, region).client
    message = {"role": "user", "content": [{"image": {"format": "png", "source": source}}]}
    return client.converse(modelId=model_id, messages=[message])  # type: ignore[list-item]


def _put(aws: Aws, key: str) -> str:
    aws.s3.put_object(Bucket=aws.bucket, Key=key, Body=PNG)
    return f"s3://{aws.bucket}/{key}"


def test_the_wire_server_refuses_an_s3_source_whose_object_does_not_exist(
    aws: Aws, wire: BedrockWire
) -> None:
    uri = f"s3://{aws.bucket}/tk/missing"

    with pytest.raises(wire_error(), match="Unable to access the S3 object"):
        _converse(wire, NOVA, {"s3Location": {"uri": uri}})


def test_the_wire_server_refuses_an_s3_source_to_claude(aws: Aws, wire: BedrockWire) -> None:
    uri = _put(aws, "tk/claude.png")

    with pytest.raises(wire_error(), match="does not support S3 sources"):
        _converse(wire, CLAUDE, {"s3Location": {"uri": uri}})


def test_the_wire_server_refuses_an_s3_source_from_another_region(
    aws: Aws, wire: BedrockWire
) -> None:
    uri = _put(aws, "tk/east.png")

    with pytest.raises(wire_error(), match="must be in the request's region us-west-2"):
        _converse(wire, NOVA, {"s3Location": {"uri": uri}}, region="us-west-2")


def test_the_wire_server_refuses_an_s3_source_of_another_owner(aws: Aws, wire: BedrockWire) -> None:
    uri = _put(aws, "tk/owned.png")

    with pytest.raises(wire_error(), match="not owned by account 210987654321"):
        _converse(wire, NOVA, {"s3Location": {"uri": uri, "bucketOwner": "210987654321"}})


def test_the_wire_server_reads_an_existing_s3_source_for_nova(aws: Aws, wire: BedrockWire) -> None:
    uri = _put(aws, "tk/ok.png")

    _converse(wire, NOVA, {"s3Location": {"uri": uri, "bucketOwner": ACCOUNT}})

    assert wire.invalid == []
    assert wire.received[0].resolved == {uri: PNG}


def wire_error() -> type[Exception]:
    from botocore.exceptions import ClientError

    return ClientError
