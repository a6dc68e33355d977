"""Attachments are checked from their bytes: the type from magic numbers, image dimensions,
DOCX/XLSX expansion and polyglots, each refusal one line naming the file (docs/attachments.md)."""

from __future__ import annotations

import pytest

from tests.support import attachment_files as files
from turnkeep.attachments import BEDROCK_LIMITS, AttachmentRefused, check_bytes


def _check(data: bytes, name: str, media_type: str) -> object:
    return check_bytes(data, name=name, declared_type=media_type, limits=BEDROCK_LIMITS)


@pytest.mark.parametrize(
    ("fmt", "name", "media_type"),
    [
        ("PNG", "a.png", "image/png"),
        ("JPEG", "a.jpg", "image/jpeg"),
        ("GIF", "a.gif", "image/gif"),
        ("WEBP", "a.webp", "image/webp"),
    ],
)
def test_each_accepted_image_format_passes_with_its_size_read(
    fmt: str, name: str, media_type: str
) -> None:
    checked = _check(files.image(fmt, (16, 8)), name, media_type)
    assert (checked.media_type, checked.width, checked.height) == (media_type, 16, 8)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("data", "name", "media_type"),
    [
        (files.pdf(), "contract.pdf", "application/pdf"),
        (files.office("docx"), "memo.docx", files.DOCX_TYPE),
        (files.office("xlsx"), "sheet.xlsx", files.XLSX_TYPE),
        (b"just text\n", "notes.txt", "text/plain"),
        (b"# Title\n\nbody\n", "notes.md", "text/markdown"),
        (b"a,b\n1,2\n", "rows.csv", "text/csv"),
        (b"<!DOCTYPE html><html><body>hi</body></html>", "page.html", "text/html"),
    ],
)
def test_each_accepted_document_format_passes(data: bytes, name: str, media_type: str) -> None:
    assert _check(data, name, media_type).media_type == media_type  # type: ignore[attr-defined]


def test_a_pdf_renamed_png_is_refused_as_a_pdf() -> None:
    with pytest.raises(AttachmentRefused) as refused:
        _check(files.pdf(), "shot.png", "image/png")
    assert str(refused.value) == (
        "'shot.png': declared 'image/png' but the bytes are a PDF (application/pdf)"
    )


def test_a_pdf_declared_as_a_pdf_but_named_png_is_refused_for_its_name() -> None:
    with pytest.raises(
        AttachmentRefused, match="the name says a PNG image but the bytes are a PDF"
    ):
        _check(files.pdf(), "shot.png", "application/pdf")


def test_a_one_by_100000_pixel_image_is_refused_for_its_side() -> None:
    with pytest.raises(AttachmentRefused, match=r"1×100000 px; each side must be 1 to 8000 px"):
        _check(files.tall_png(), "tall.png", "image/png")


def test_a_zip_bomb_docx_is_refused_without_expanding_it_all() -> None:
    with pytest.raises(AttachmentRefused, match="zip bomb"):
        _check(files.zip_bomb_docx(), "bomb.docx", files.DOCX_TYPE)


def test_a_docx_that_expands_past_the_cap_at_a_modest_ratio_is_refused() -> None:
    import os

    limits = BEDROCK_LIMITS.__class__(zip_expanded_bytes=1024 * 1024)
    noisy = os.urandom(1536 * 1024)  # incompressible: ratio 1, over the 1 MiB budget
    with pytest.raises(AttachmentRefused, match="expands past 1048576 bytes"):
        check_bytes(
            files.office("docx", {"word/media/noise.bin": noisy}),
            name="big.docx",
            declared_type=files.DOCX_TYPE,
            limits=limits,
        )


def test_a_png_with_a_zip_appended_is_refused_as_a_polyglot() -> None:
    with pytest.raises(AttachmentRefused, match="also a ZIP archive"):
        _check(files.polyglot_png_zip(), "both.png", "image/png")


def test_a_png_with_trailing_bytes_is_refused() -> None:
    with pytest.raises(AttachmentRefused, match="data after its end"):
        _check(files.image("PNG") + b"<script>alert(1)</script>", "x.png", "image/png")


def test_a_text_file_with_a_pdf_header_inside_is_refused_as_a_polyglot() -> None:
    with pytest.raises(AttachmentRefused, match="PDF header"):
        _check(b"hello\n%PDF-1.4\n", "x.txt", "text/plain")


def test_an_image_over_its_byte_cap_is_refused() -> None:
    limits = BEDROCK_LIMITS.__class__(image_bytes=100)
    with pytest.raises(AttachmentRefused, match="over the 100-byte cap"):
        check_bytes(
            files.image("PNG", (64, 64)), name="a.png", declared_type="image/png", limits=limits
        )


def test_binary_bytes_of_no_accepted_format_are_refused() -> None:
    with pytest.raises(AttachmentRefused, match="no accepted format"):
        _check(b"\x00\x01\x02garbage", "x.txt", "text/plain")


def test_a_zip_that_is_not_an_office_document_is_refused() -> None:
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("a.txt", "x")
    with pytest.raises(
        AttachmentRefused, match=r"a ZIP archive \(application/zip\) is not accepted"
    ):
        _check(out.getvalue(), "a.docx", files.DOCX_TYPE)


def test_html_declared_as_plain_text_is_refused() -> None:
    with pytest.raises(AttachmentRefused, match="the bytes are HTML"):
        _check(b"<html><body>x</body></html>", "x.txt", "text/plain")


def test_a_truncated_pdf_is_refused() -> None:
    with pytest.raises(AttachmentRefused, match="no end marker"):
        _check(files.pdf()[:-20], "x.pdf", "application/pdf")
