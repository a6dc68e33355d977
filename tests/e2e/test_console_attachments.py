"""Attachments in the console, in a real browser (headless Debian chromium against a real
server): the attach button, drag and drop and paste of an image; thumbnails in the tray and in
the transcript; a refused file's reason readable; the model got the bytes
(docs/attachments.md, "Clients")."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.e2e.test_console_browser import (
    TURN_MS,
    connect,
    last_turn,
    new_session,
    send,
    wait_status,
)
from tests.support import attachment_files as files
from tests.support.browser import Pages
from tests.support.console import module_server
from tests.support.real_server import RealServer

pytestmark = pytest.mark.slow

# Builds a File in the page from base64 and fires `kind` ("drop" on the composer, "paste" on
# the message box) carrying it, as a person's drag or Ctrl+V does.
FIRE = """([kind, name, type, b64]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], name, { type }));
  const target = document.getElementById(kind === "drop" ? "composer" : "message");
  const event = kind === "drop"
    ? new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true })
    : new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true });
  target.dispatchEvent(event);
}"""


server = module_server({"TURNKEEP_MODEL": "scripted"})


def test_files_attach_by_button_drop_and_paste_and_reach_the_model_with_thumbnails(
    server: RealServer, tmp_path: Path, browser: Pages
) -> None:
    shot, drawn, pasted, pdf = (
        files.image("PNG", (40, 20)),
        files.image("PNG", (20, 20), "blue"),
        files.image("PNG", (10, 10), "green"),
        files.pdf(),
    )
    (tmp_path / "shot.png").write_bytes(shot)
    (tmp_path / "contract.pdf").write_bytes(pdf)
    (tmp_path / "renamed.png").write_bytes(pdf)
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    connect(page, server, "ines")
    new_session(page, "with files")

    page.set_input_files(
        "#attach-input", [str(tmp_path / "shot.png"), str(tmp_path / "contract.pdf")]
    )
    page.wait_for_selector("#attach-list .attachment[data-name='contract.pdf']", timeout=TURN_MS)
    page.evaluate(FIRE, ["drop", "drawn.png", "image/png", base64.b64encode(drawn).decode()])
    page.wait_for_selector("#attach-list .attachment[data-name='drawn.png']", timeout=TURN_MS)
    page.evaluate(FIRE, ["paste", "", "image/png", base64.b64encode(pasted).decode()])
    page.wait_for_selector("#attach-list .attachment[data-name='pasted.png']", timeout=TURN_MS)
    assert page.locator("#attach-list img.thumb").count() == 3

    page.set_input_files("#attach-input", str(tmp_path / "renamed.png"))
    refusal = page.locator("#attach-error")
    refusal.wait_for(state="visible", timeout=TURN_MS)
    assert "renamed.png was not attached" in refusal.inner_text()
    assert "declared 'image/png' but the bytes are a PDF (application/pdf)" in refusal.inner_text()
    assert page.locator("#attach-list .attachment").count() == 4

    turn = send(page, "look at these")
    wait_status(page, "completed", turn)
    reply = last_turn(page).locator(".msg.assistant .bubble-text").last.inner_text()
    assert (
        f"Attached: shot.png (image/png, {len(shot)} bytes, sha256 {files.sha256(shot)[:12]})"
        in reply
    )
    assert f"Attached: contract.pdf (application/pdf, {len(pdf)} bytes" in reply
    assert "Attached: drawn.png (image/png" in reply
    assert "Attached: pasted.png (image/png" in reply
    chips = last_turn(page).locator(".msg.user .attachment")
    assert chips.count() == 4
    page.wait_for_function(
        "() => document.querySelectorAll('#transcript .msg.user img.thumb').length === 3",
        timeout=TURN_MS,
    )
    assert page.locator("#attach-list .attachment").count() == 0  # the tray emptied
    assert errors == []
