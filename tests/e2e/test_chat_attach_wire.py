"""Issue #32 "Done when", the CLI leg: `turnkeep chat --url` against a real API server whose
model is Bedrock (through the wire-level server, every request validated by botocore's
ParamValidator) or an OpenAI-compatible server: `/attach` uploads a PNG and a PDF through the
API and the next message carries their exact bytes to the model (docs/attachments.md,
"Clients" and "On the wire")."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli_remote_chat import _chat as remote_chat
from tests.support import attachment_files as files
from tests.support.bedrock_wire import Answer, BedrockWire, Received, decoded, stream_frames
from tests.support.bedrock_wire import neutral_request as bedrock_request
from tests.support.openai_server import ChatServer, sse_reply
from tests.support.openai_server import neutral_request as chat_request
from tests.support.real_server import RealServer
from turnkeep.providers.scripted import ScriptedProvider

CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"
PNG = files.image("PNG", (24, 12))
PDF = files.pdf("the contract")
SCRIPT = "/attach shot.png\n/attach contract.pdf\nwhat are these?\n/quit\n"


def _serve(tmp_path: Path, env: dict[str, str]) -> Iterator[str]:
    real = RealServer(tmp_path / "data", extra_env=env)
    try:
        yield real.start()
    finally:
        real.stop()
        errors = "".join(real.stderr)
        assert "Traceback" not in errors, errors


def _chat_with_both(url: str, tmp_path: Path) -> str:
    (tmp_path / "shot.png").write_bytes(PNG)
    (tmp_path / "contract.pdf").write_bytes(PDF)
    done = remote_chat(url, SCRIPT, tmp_path, "--user", "alice")
    assert done.returncode == 0, done.stderr
    assert f"[attached shot.png (image/png, {len(PNG)} bytes)" in done.stdout
    assert f"[attached contract.pdf (application/pdf, {len(PDF)} bytes)" in done.stdout
    return done.stdout


@pytest.fixture
def wire() -> Iterator[BedrockWire]:
    def answer(received: Received) -> Answer:
        return Answer(stream_frames(ScriptedProvider().complete(bedrock_request(received.body))))

    with BedrockWire(responder=answer) as running:
        yield running


@pytest.fixture
def bedrock_server(wire: BedrockWire, tmp_path: Path) -> Iterator[str]:
    yield from _serve(
        tmp_path,
        {
            "TURNKEEP_MODEL": f"bedrock:{CLAUDE}",
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": wire.url,
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        },
    )


def test_chat_url_attachments_reach_bedrock_as_valid_image_and_document_blocks(
    wire: BedrockWire, bedrock_server: str, tmp_path: Path
) -> None:
    out = _chat_with_both(bedrock_server, tmp_path)

    assert wire.invalid == []
    assert [r.operation for r in wire.received] == ["ConverseStream"]
    blocks = wire.bodies[0]["messages"][-1]["content"]
    [image] = [b["image"] for b in blocks if "image" in b]
    [document] = [b["document"] for b in blocks if "document" in b]
    assert (image["format"], decoded(image["source"]["bytes"])) == ("png", PNG)
    assert (document["format"], decoded(document["source"]["bytes"])) == ("pdf", PDF)
    assert f"(image/png, {len(PNG)} bytes, sha256 {files.sha256(PNG)[:12]})" in out
    assert f"(application/pdf, {len(PDF)} bytes, sha256 {files.sha256(PDF)[:12]})" in out


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    def answer(body: dict[str, Any]) -> Any:
        return sse_reply(list(ScriptedProvider().stream(chat_request(body))))

    with ChatServer(responder=answer) as running:
        yield running


@pytest.fixture
def chat_server(chat: ChatServer, tmp_path: Path) -> Iterator[str]:
    yield from _serve(tmp_path, {"TURNKEEP_MODEL": f"openai:{chat.base_url}#gpt-4o"})


def test_chat_url_attachments_reach_an_openai_server_as_data_urls(
    chat: ChatServer, chat_server: str, tmp_path: Path
) -> None:
    out = _chat_with_both(chat_server, tmp_path)

    [request] = chat.requests
    parts = request.body["messages"][-1]["content"]
    [image] = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    [document] = [p["file"] for p in parts if p["type"] == "file"]
    assert image.startswith("data:image/png;base64,")
    assert base64.b64decode(image.split(",", 1)[1], validate=True) == PNG
    assert document["filename"] == "contract.pdf"
    assert base64.b64decode(document["file_data"].split(",", 1)[1], validate=True) == PDF
    # An image part carries no name on the wire; the model describes the bytes it got.
    assert f"(image/png, {len(PNG)} bytes, sha256 {files.sha256(PNG)[:12]})" in out
    assert (
        f"contract.pdf (application/pdf, {len(PDF)} bytes, sha256 {files.sha256(PDF)[:12]})" in out
    )
