"""Issue #32 "Done when", the API leg: a PNG and a PDF uploaded through the HTTP API (declare,
then PUT the bytes) and named by a turn reach the Bedrock wire-level server as `image` and
`document` blocks of a ConverseStream request (validated by botocore's ParamValidator and the
service's own rules) and an OpenAI-compatible server as data URLs, with their exact bytes, in
every round of the turn (a tool call in between) (docs/attachments.md, "On the wire")."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from tests.support import attachment_files as files
from tests.support.api_client import ApiHarness, auth, make_api_harness
from tests.support.bedrock_wire import Answer, BedrockWire, Received, decoded, stream_frames
from tests.support.bedrock_wire import neutral_request as bedrock_request
from tests.support.openai_server import ChatServer, sse_reply
from tests.support.openai_server import neutral_request as chat_request
from turnkeep.providers.bedrock import BedrockProvider
from turnkeep.providers.factory import provider_from_config
from turnkeep.providers.scripted import ScriptedProvider

CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"
PNG = files.image("PNG", (24, 12))
PDF = files.pdf("the contract")
# The scripted model behind both servers calls the notes tool, then answers after its result:
# two model rounds in one turn.
TOOL_ROUND = "call working_notes_get {}"


def _bedrock_answer(received: Received) -> Answer:
    return Answer(stream_frames(ScriptedProvider().complete(bedrock_request(received.body))))


@pytest.fixture
def wire() -> Iterator[BedrockWire]:
    with BedrockWire(responder=_bedrock_answer) as running:
        yield running


@pytest.fixture
def bedrock_api(wire: BedrockWire) -> Iterator[ApiHarness]:
    client = boto3.client(
        "bedrock-runtime",
        endpoint_url=wire.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )
    yield from make_api_harness(provider=BedrockProvider(CLAUDE, client))


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    def answer(body: dict[str, Any]) -> Any:
        return sse_reply(list(ScriptedProvider().stream(chat_request(body))))

    with ChatServer(responder=answer) as running:
        yield running


@pytest.fixture
def chat_api(chat: ChatServer) -> Iterator[ApiHarness]:
    provider = provider_from_config(f"openai:{chat.base_url}#gpt-4o", http_client=httpx.Client())
    yield from make_api_harness(provider=provider)


def _upload(api: ApiHarness, sid: str, data: bytes, name: str, media_type: str) -> str:
    """Declare an attachment, PUT its bytes where the API says; the id of the ready one."""
    declared = api.client.post(
        f"/sessions/{sid}/attachments",
        json={
            "name": name,
            "media_type": media_type,
            "size": len(data),
            "sha256": files.sha256(data),
        },
        headers=auth(),
    )
    assert declared.status_code == 201, declared.text
    upload = declared.json()["upload"]
    assert upload["method"] == "PUT"
    done = api.client.put(upload["url"], content=data, headers={**auth(), **upload["headers"]})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "ready"
    ident: str = done.json()["id"]
    return ident


def _turn_with_both(api: ApiHarness, text: str) -> tuple[str, list[str]]:
    """A session, a PNG and a PDF uploaded, a turn naming both; the session id and the ids."""
    sid = api.session()
    ids = [
        _upload(api, sid, PNG, "shot.png", "image/png"),
        _upload(api, sid, PDF, "contract.pdf", "application/pdf"),
    ]
    started = api.client.post(
        f"/sessions/{sid}/turns", json={"text": text, "attachments": ids}, headers=auth()
    )
    assert started.status_code == 202, started.text
    return sid, ids


def _transcript(api: ApiHarness, sid: str) -> str:
    response = api.client.get(f"/sessions/{sid}/transcript", headers=auth())
    assert response.status_code == 200, response.text
    return repr(response.json())


def _bedrock_files(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The one image and the one document block of a Converse request's messages."""
    blocks = [b for m in body["messages"] for b in m["content"]]
    [image] = [b["image"] for b in blocks if "image" in b]
    [document] = [b["document"] for b in blocks if "document" in b]
    return image, document


def test_a_png_and_a_pdf_uploaded_through_the_api_reach_bedrock_as_valid_blocks(
    wire: BedrockWire, bedrock_api: ApiHarness
) -> None:
    sid, _ = _turn_with_both(bedrock_api, "what are these?")

    assert wire.invalid == []
    assert [r.operation for r in wire.received] == ["ConverseStream"]
    image, document = _bedrock_files(wire.bodies[0])
    assert image["format"] == "png"
    assert decoded(image["source"]["bytes"]) == PNG
    assert document["format"] == "pdf"
    assert decoded(document["source"]["bytes"]) == PDF
    # The scripted model behind the server describes the bytes it was sent (an image block
    # carries no name on the Converse wire).
    text = _transcript(bedrock_api, sid)
    assert f"(image/png, {len(PNG)} bytes, sha256 {files.sha256(PNG)[:12]})" in text
    assert f"(application/pdf, {len(PDF)} bytes, sha256 {files.sha256(PDF)[:12]})" in text


def test_the_second_round_of_a_turn_re_sends_both_files_to_bedrock(
    wire: BedrockWire, bedrock_api: ApiHarness
) -> None:
    sid, _ = _turn_with_both(bedrock_api, TOOL_ROUND)

    assert wire.invalid == []
    assert [r.operation for r in wire.received] == ["ConverseStream", "ConverseStream"]
    second = wire.bodies[1]
    assert any("toolResult" in b for m in second["messages"] for b in m["content"])
    image, document = _bedrock_files(second)
    assert decoded(image["source"]["bytes"]) == PNG
    assert decoded(document["source"]["bytes"]) == PDF
    assert "Tool working_notes_get returned" in _transcript(bedrock_api, sid)


def _chat_files(body: dict[str, Any]) -> tuple[str, str]:
    """The image data URL and the file data of a Chat Completions request's user content."""
    parts = [
        p for m in body["messages"] if isinstance(m.get("content"), list) for p in m["content"]
    ]
    [image] = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    [document] = [p["file"]["file_data"] for p in parts if p["type"] == "file"]
    return image, document


def _data_url_bytes(url: str, media_type: str) -> bytes:
    prefix = f"data:{media_type};base64,"
    assert url.startswith(prefix), url[:60]
    return base64.b64decode(url.removeprefix(prefix), validate=True)


def test_a_png_and_a_pdf_uploaded_through_the_api_reach_an_openai_server_as_data_urls(
    chat: ChatServer, chat_api: ApiHarness
) -> None:
    sid, _ = _turn_with_both(chat_api, "what are these?")

    [request] = chat.requests
    image, document = _chat_files(request.body)
    assert _data_url_bytes(image, "image/png") == PNG
    assert _data_url_bytes(document, "application/pdf") == PDF
    assert f"sha256 {files.sha256(PNG)[:12]}" in _transcript(chat_api, sid)


def test_the_second_round_of_a_turn_re_sends_both_files_to_an_openai_server(
    chat: ChatServer, chat_api: ApiHarness
) -> None:
    sid, _ = _turn_with_both(chat_api, TOOL_ROUND)

    assert len(chat.requests) == 2
    second = chat.requests[1].body
    assert any(m["role"] == "tool" for m in second["messages"])
    image, document = _chat_files(second)
    assert _data_url_bytes(image, "image/png") == PNG
    assert _data_url_bytes(document, "application/pdf") == PDF
    assert "Tool working_notes_get returned" in _transcript(chat_api, sid)
