"""Issue #32 "Done when", the console leg: in a real browser (headless Debian chromium) the
console of a real `turnkeep serve` whose model is Bedrock, pointed at the Bedrock wire-level
server (every request validated by botocore's ParamValidator plus the service's own rules),
attaches a PNG and a PDF with its Attach… button, sends a turn, and the wire server receives an
image and a document block carrying the exact bytes; the console shows the model's reply and the
image's thumbnail (docs/attachments.md, "Clients" and "On the wire")."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import attachment_files as files
from tests.support.bedrock_wire import Answer, BedrockWire, Received, decoded, stream_frames
from tests.support.browser import chromium
from tests.support.real_server import RealServer
from turnkeep.providers.scripted import ScriptedProvider

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow

CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"
TURN_MS = 30_000
PNG = files.image("PNG", (48, 16), "red")
PDF = files.pdf("the console's contract")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def wire() -> Iterator[BedrockWire]:
    def answer(received: Received) -> Answer:
        # The scripted model describes the bytes the server received.
        return Answer(stream_frames(ScriptedProvider().complete(received.request())))

    with BedrockWire(responder=answer) as running:
        yield running


@pytest.fixture
def server(wire: BedrockWire, tmp_path: Path) -> Iterator[RealServer]:
    data = tmp_path / "data"
    data.mkdir()
    real = RealServer(
        data,
        extra_env={
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
    real.start()
    try:
        yield real
    finally:
        real.stop()
    assert not real.tracebacks(), real.tracebacks()


def _open_session(page: Page, server: RealServer) -> None:
    page.goto(server.url + "/")
    page.fill("#token", "dev-ines")
    page.keyboard.press("Enter")
    page.wait_for_selector("#signed-in:has-text('Connected to')")
    page.fill("#new-title", "files to bedrock")
    page.keyboard.press("Enter")
    page.wait_for_selector("#session-title:has-text('files to bedrock')")


def _blocks(wire: BedrockWire) -> list[dict[str, Any]]:
    [received] = wire.received
    content: list[dict[str, Any]] = received.body["messages"][-1]["content"]
    return content


def test_the_console_attaches_a_png_and_a_pdf_that_reach_bedrock_byte_for_byte(
    wire: BedrockWire, server: RealServer, tmp_path: Path
) -> None:
    (tmp_path / "shot.png").write_bytes(PNG)
    (tmp_path / "contract.pdf").write_bytes(PDF)
    with chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        _open_session(page, server)

        # The Attach… button opens the file chooser, as a person's click does.
        with page.expect_file_chooser() as chooser:
            page.click("#attach")
        chooser.value.set_files([str(tmp_path / "shot.png"), str(tmp_path / "contract.pdf")])
        page.wait_for_selector("#attach-list .attachment[data-name='shot.png']", timeout=TURN_MS)
        page.wait_for_selector(
            "#attach-list .attachment[data-name='contract.pdf']", timeout=TURN_MS
        )

        page.fill("#message", "what are these?")
        page.keyboard.press("Enter")
        page.wait_for_selector("#transcript .turn[data-status=completed]", timeout=TURN_MS)

        turn = page.locator("#transcript .turn").last
        reply = turn.locator(".msg.assistant .bubble-text").last.inner_text()
        # The transcript's thumbnail is the PNG itself, decoded by the browser at its size.
        page.wait_for_function(
            """() => {
              const img = document.querySelector('#transcript .msg.user img.thumb');
              return img !== null && img.complete && img.naturalWidth > 0;
            }""",
            timeout=TURN_MS,
        )
        size = page.evaluate(
            """() => {
              const img = document.querySelector('#transcript .msg.user img.thumb');
              return [img.naturalWidth, img.naturalHeight];
            }"""
        )
        chips = turn.locator(".msg.user .attachment").count()
        assert errors == []

    assert wire.invalid == []
    blocks = _blocks(wire)
    [image] = [b["image"] for b in blocks if "image" in b]
    [document] = [b["document"] for b in blocks if "document" in b]
    assert image["format"] == "png"
    assert _sha(decoded(image["source"]["bytes"])) == _sha(PNG)
    assert (document["format"], document["name"]) == ("pdf", "contract")
    assert _sha(decoded(document["source"]["bytes"])) == _sha(PDF)
    # The console shows the model's reply, which describes the bytes Bedrock got.
    assert f"Attached: image.png (image/png, {len(PNG)} bytes, sha256 {_sha(PNG)[:12]})" in reply
    assert f"Attached: contract (application/pdf, {len(PDF)} bytes, sha256 {_sha(PDF)[:12]})" in (
        reply
    )
    assert size == [48, 16]
    assert chips == 2
