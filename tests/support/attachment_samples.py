"""Small real attachment files for tests: a PNG built by hand (signature, IHDR, IDAT, IEND with
their CRCs) and a one-page PDF, so the bytes a provider sends are files a model could open."""

from __future__ import annotations

import hashlib
import struct
import zlib

from turnkeep.providers.base import AttachmentPart


def png_bytes(width: int = 4, height: int = 3) -> bytes:
    """A valid RGB PNG of `width` x `height` grey pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x80\x80\x80" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PDF_BYTES = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
    b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
)


def attachment(name: str, media_type: str, data: bytes, attachment_id: str = "") -> AttachmentPart:
    """A loaded attachment part, its id derived from the bytes unless given."""
    ident = attachment_id or "att-" + hashlib.sha256(data).hexdigest()[:12]
    return AttachmentPart(ident, name, media_type, len(data), data)


def png(name: str = "screenshot.png", width: int = 4, height: int = 3) -> AttachmentPart:
    return attachment(name, "image/png", png_bytes(width, height))


def pdf(name: str = "contract v2.final.pdf") -> AttachmentPart:
    return attachment(name, "application/pdf", PDF_BYTES)
