"""`/attach PATH` in `turnkeep chat`, in-process and with `--url` against a real API server:
the file is uploaded and checked, its name, type and size printed, and the next message
carries it to the model (the scripted model describes the bytes it got); a hostile file is
refused with a one-line reason (docs/attachments.md, "Clients")."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from tests.e2e.test_api_server import server  # noqa: F401  (the real-server fixture)
from tests.e2e.test_cli_remote_chat import _chat as remote_chat
from tests.support import attachment_files as files
from turnkeep import cli


def _files(tmp_path: Path) -> tuple[bytes, bytes]:
    png, pdf = files.image("PNG", (24, 12)), files.pdf()
    (tmp_path / "shot.png").write_bytes(png)
    (tmp_path / "contract.pdf").write_bytes(pdf)
    (tmp_path / "renamed.png").write_bytes(pdf)
    return png, pdf


SCRIPT = (
    "/attach shot.png\n/attach contract.pdf\nlook at these\n/attach renamed.png\n/attach nope.png\n"
    "plain again\n/quit\n"
)


def _expect(out: str, png: bytes, pdf: bytes) -> None:
    assert f"[attached shot.png (image/png, {len(png)} bytes): sent with your next message]" in out
    assert f"[attached contract.pdf (application/pdf, {len(pdf)} bytes)" in out
    assert (
        f"Attached: shot.png (image/png, {len(png)} bytes, sha256 {files.sha256(png)[:12]})" in out
    )
    pdf_sha = files.sha256(pdf)[:12]
    assert f"Attached: contract.pdf (application/pdf, {len(pdf)} bytes, sha256 {pdf_sha})" in out
    assert (
        "[attach refused: 'renamed.png': the name says a PNG image but the bytes are a PDF" in out
    )
    assert "[attach refused: nope.png: No such file or directory]" in out
    # Attachments go with the next message only.
    assert out.count("Attached: shot.png") == 1


def test_chat_attaches_files_to_the_next_message_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    png, pdf = _files(tmp_path)
    for key in [k for k in os.environ if k.startswith("TURNKEEP_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    args = cli.build_parser().parse_args(["chat", "--session", "s-attach"])
    assert cli.run_chat(args, io.StringIO(SCRIPT), out) == 0
    _expect(out.getvalue(), png, pdf)


def test_chat_url_uploads_through_the_api(server: str, tmp_path: Path) -> None:  # noqa: F811
    png, pdf = _files(tmp_path)
    done = remote_chat(server, SCRIPT, tmp_path, "--user", "alice")
    assert done.returncode == 0, done.stderr
    _expect(done.stdout, png, pdf)
    assert not (tmp_path / ".local").exists()
