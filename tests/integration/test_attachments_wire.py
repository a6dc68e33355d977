"""Attachments on the wire (docs/attachments.md, "On the wire"): a PNG and a PDF reach the
Bedrock wire-level server (every request validated by botocore's ParamValidator plus the
service's own rules) and an OpenAI-compatible server (as data URLs); images a tool returned ride
in the tool result where the model takes them."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from tests.support.attachment_samples import PDF_BYTES, attachment, pdf, png, png_bytes
from tests.support.bedrock_wire import Answer, BedrockWire, decoded, stream_frames
from tests.support.openai_server import ChatServer, neutral_request, sse_reply
from turnkeep.providers import wire_attachments
from turnkeep.providers.base import (
    FatalModelError,
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from turnkeep.providers.bedrock import BedrockProvider
from turnkeep.providers.factory import provider_from_config
from turnkeep.providers.scripted import ScriptedProvider

CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"
LLAMA = "meta.llama3-2-90b-instruct-v1:0"
TOOL = ToolSpec("screenshot", "Take a screenshot.", {"type": "object", "properties": {}})


@pytest.fixture
def wire() -> Iterator[BedrockWire]:
    reply = ModelResponse(Message("assistant", (TextPart("seen"),)), "end_turn", Usage(3, 1))
    with BedrockWire(responder=lambda _: Answer(stream_frames(reply))) as running:
        yield running


def _client(wire: BedrockWire) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=wire.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )


def _ask(*parts: Any) -> ModelRequest:
    return ModelRequest("", (Message("user", (TextPart("what is this?"), *parts)),))


def _tool_round(result: ToolResultPart) -> ModelRequest:
    return ModelRequest(
        "",
        (
            Message("user", (TextPart("take a screenshot"),)),
            Message("assistant", (ToolCallPart(result.call_id, result.name, "{}"),)),
            Message("tool", (result,)),
        ),
        (TOOL,),
    )


def test_bedrock_receives_a_png_and_a_pdf_as_valid_image_and_document_blocks(
    wire: BedrockWire,
) -> None:
    BedrockProvider(CLAUDE, _client(wire)).complete(_ask(png(), pdf()))

    assert wire.invalid == []
    content = wire.bodies[0]["messages"][0]["content"]
    image, document = content[1]["image"], content[2]["document"]
    assert image["format"] == "png"
    assert decoded(image["source"]["bytes"]) == png_bytes()
    assert document["format"] == "pdf"
    assert decoded(document["source"]["bytes"]) == PDF_BYTES
    assert document["name"] == "contract v2 final"  # dots are outside Converse's name rule


def test_a_document_name_outside_the_rule_is_refused_by_the_wire_server(
    wire: BedrockWire, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The emulated service rule can fail: an unsanitized name breaks it.
    monkeypatch.setattr(wire_attachments, "document_name", lambda name: name)

    with pytest.raises(FatalModelError, match="name that contains only alphanumeric"):
        BedrockProvider(CLAUDE, _client(wire)).complete(_ask(pdf("a.b.pdf")))
    assert len(wire.invalid) == 1


def test_documents_of_one_name_get_distinct_names_bedrock_accepts(wire: BedrockWire) -> None:
    first = pdf("notes.pdf")
    second = attachment("notes.md", "text/markdown", b"# notes")

    BedrockProvider(CLAUDE, _client(wire)).complete(_ask(first, second))

    assert wire.invalid == []
    content = wire.bodies[0]["messages"][0]["content"]
    names = [b["document"]["name"] for b in content if "document" in b]
    assert names == ["notes", "notes (2)"]


def test_a_tool_image_reaches_claude_inside_the_tool_result(wire: BedrockWire) -> None:
    shot = png("shot.png")
    result = ToolResultPart("c1", "screenshot", "here it is", attachments=(shot,))

    BedrockProvider(CLAUDE, _client(wire)).complete(_tool_round(result))

    assert wire.invalid == []
    sent = wire.bodies[0]["messages"][2]["content"][0]["toolResult"]["content"]
    assert sent[0] == {"text": "here it is"}
    assert decoded(sent[1]["image"]["source"]["bytes"]) == shot.data


def test_a_tool_image_for_a_model_without_tool_images_becomes_a_note(wire: BedrockWire) -> None:
    result = ToolResultPart("c1", "screenshot", "here it is", attachments=(png("shot.png"),))

    BedrockProvider(LLAMA, _client(wire)).complete(_tool_round(result))

    assert wire.invalid == []
    sent = wire.bodies[0]["messages"][2]["content"][0]["toolResult"]["content"]
    assert len(sent) == 2
    assert "image shot.png" in sent[1]["text"]
    assert "cannot see images in tool results" in sent[1]["text"]


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    def answer(body: dict[str, Any]) -> Any:
        return sse_reply(list(ScriptedProvider().stream(neutral_request(body))))

    with ChatServer(responder=answer) as running:
        yield running


def _chat_provider(chat: ChatServer, model: str) -> Any:
    return provider_from_config(f"openai:{chat.base_url}#{model}", http_client=httpx.Client())


def test_an_openai_compatible_server_receives_the_png_as_a_data_url_and_the_pdf_as_a_file(
    chat: ChatServer,
) -> None:
    _chat_provider(chat, "gpt-4o").complete(_ask(png(), pdf("contract.pdf")))

    content = chat.requests[0].body["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "what is this?"}
    url = content[1]["image_url"]["url"]
    assert url == "data:image/png;base64," + base64.b64encode(png_bytes()).decode()
    assert content[2]["type"] == "file"
    assert content[2]["file"]["filename"] == "contract.pdf"
    assert content[2]["file"]["file_data"].startswith("data:application/pdf;base64,")


def test_a_text_document_goes_inline_to_a_local_server(chat: ChatServer) -> None:
    notes = attachment("notes.csv", "text/csv", b"a,b\n1,2\n")

    _chat_provider(chat, "llama3.1").complete(_ask(notes))

    content = chat.requests[0].body["messages"][0]["content"]
    assert content[1] == {"type": "text", "text": "[document notes.csv (text/csv)]\na,b\n1,2\n"}


def test_a_tool_image_follows_the_tool_message_for_a_vision_chat_model(chat: ChatServer) -> None:
    shot = png("shot.png")
    result = ToolResultPart("c1", "screenshot", "here it is", attachments=(shot,))

    _chat_provider(chat, "gpt-4o").complete(_tool_round(result))

    messages = chat.requests[0].body["messages"]
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "here it is"}
    assert messages[3]["role"] == "user"
    assert messages[3]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
