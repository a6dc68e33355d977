"""Attachment files made in the test, benign and hostile (docs/attachments.md, "Checks"):
real PNG/JPEG/GIF/WebP images from Pillow, a minimal PDF, DOCX/XLSX written with zipfile, and
the hostile ones the checks must refuse."""

from __future__ import annotations

import hashlib
import io
import zipfile

from PIL import Image

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def sha256(data: bytes) -> str:
    """The hex sha256 a client declares."""
    return hashlib.sha256(data).hexdigest()


def image(fmt: str = "PNG", size: tuple[int, int] = (16, 8), color: str = "red") -> bytes:
    """An image of `size` px in Pillow format `fmt`."""
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format=fmt)
    return out.getvalue()


def pdf(text: str = "hello") -> bytes:
    """A small well-formed one-page PDF."""
    body = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(body) + body + b"\nendstream",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + obj + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def office(kind: str = "docx", extra: dict[str, bytes] | None = None) -> bytes:
    """A minimal DOCX (`kind="docx"`) or XLSX with optional extra members."""
    main = "word/document.xml" if kind == "docx" else "xl/workbook.xml"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        archive.writestr(main, '<?xml version="1.0"?><document>hello</document>')
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return out.getvalue()


def zip_bomb_docx(expanded: int = 60 * 1024 * 1024) -> bytes:
    """A DOCX whose one extra part is `expanded` zero bytes: a few dozen KiB on the wire."""
    return office("docx", {"word/media/bomb.bin": bytes(expanded)})


def polyglot_png_zip() -> bytes:
    """A valid PNG with a ZIP archive appended: opens as either."""
    return image("PNG") + office("docx")


def tall_png() -> bytes:
    """A 1×100000 px PNG: small on the wire, far past 8000 px on one side."""
    out = io.BytesIO()
    Image.new("L", (1, 100_000), 0).save(out, format="PNG")
    return out.getvalue()
