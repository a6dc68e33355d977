"""Bedrock `s3Location` sources through the turn state machine of template.yaml under moto
(docs/attachments.md, "S3 sources"): the real model step handler, configured as the template
configures it (TURNKEEP_ATTACHMENT_BUCKET_OWNER the account, the default `auto` source), sends a
Nova turn's PNG and PDF as the S3 objects under the session's prefix; the Bedrock wire-level
server validates the request and reads them from moto's S3, and the model describes their
bytes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from tests.support.attachment_samples import PDF_BYTES, png_bytes
from tests.support.bedrock_wire import Answer, BedrockWire, Received, stream_frames
from tests.support.state_machine import BUCKET, USER, Deployed, deploy, run_turn
from turnkeep.attachments import AttachmentStore
from turnkeep.aws_lambda import container
from turnkeep.harness.io import AttachmentRef
from turnkeep.harness.state import load_head
from turnkeep.harness.transcript import branch_messages
from turnkeep.providers.scripted import ScriptedProvider

NOVA = "amazon.nova-pro-v1:0"
ACCOUNT = "123456789012"  # moto's account, as AWS::AccountId is the stack's
SESSION = "sfn-s3-sources"
PNG = png_bytes(30, 20)


def _answer(received: Received) -> Answer:
    return Answer(stream_frames(ScriptedProvider().complete(received.request())))


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Deployed, BedrockWire]]:
    with BedrockWire(responder=_answer) as wire:
        env = {
            "TURNKEEP_MODEL": f"bedrock:{NOVA}",
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": wire.url,
            "TURNKEEP_ATTACHMENT_BUCKET_OWNER": ACCOUNT,
        }
        with deploy(monkeypatch, "STANDARD", **env) as deployed:
            wire.s3 = boto3.client("s3")
            yield deployed, wire
    container.reset_runtime()  # the next test's runtime is built from its own environment


def _upload(name: str, media_type: str, data: bytes) -> AttachmentRef:
    storage = container.runtime().deps.open_storage(SESSION)
    try:
        store = AttachmentStore(storage)
        digest = hashlib.sha256(data).hexdigest()
        record = store.create(name=name, media_type=media_type, size=len(data), sha256=digest)
        store.receive(record.id, data)
    finally:
        storage.close()
    return AttachmentRef(attachment_id=record.id, name=name, media_type=media_type, size=len(data))


def _run(deployed: Deployed, refs: list[AttachmentRef]) -> dict[str, Any]:
    _op, output = run_turn(
        deployed,
        SESSION,
        "what are these?",
        model=None,
        attachments=refs,  # the env's model
    )
    return output


def test_the_model_step_sends_a_nova_turns_attachments_as_their_s3_objects(
    stack: tuple[Deployed, BedrockWire],
) -> None:
    deployed, wire = stack
    container.runtime().deps.envelopes.create(SESSION, USER)
    refs = [
        _upload("shot.png", "image/png", PNG),
        _upload("deal.pdf", "application/pdf", PDF_BYTES),
    ]

    output = _run(deployed, refs)

    assert output["status"] == "completed", output
    assert wire.invalid == []
    content = wire.bodies[0]["messages"][0]["content"]
    sources = [b[k]["source"] for b in content for k in ("image", "document") if k in b]
    assert sources == [
        {
            "s3Location": {
                "uri": f"s3://{BUCKET}/tk/sessions/{SESSION}/attachments/{ref.attachment_id}",
                "bucketOwner": ACCOUNT,
            }
        }
        for ref in refs
    ]
    storage = container.runtime().deps.open_storage(SESSION)
    try:
        reply = branch_messages(storage, load_head(storage))[-1].text
    finally:
        storage.close()
    png_sha, pdf_sha = (hashlib.sha256(d).hexdigest()[:12] for d in (PNG, PDF_BYTES))
    assert f"Attached: image.png (image/png, {len(PNG)} bytes, sha256 {png_sha})" in reply
    assert f"Attached: deal (application/pdf, {len(PDF_BYTES)} bytes, sha256 {pdf_sha})" in reply
