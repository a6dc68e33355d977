"""The context policy of attachments: which rounds re-send them, and what they cost in tokens
(docs/attachments.md, "Context policy").

An image is re-sent in the turn it came with and the next `IMAGE_RESEND_TURNS` turns; older
ones, and any beyond a request's per-kind count (Bedrock's 20 images and 5 documents, the
tightest of the providers), are replaced by a one-line text reference naming the attachment,
newest kept first. Tokens: images by the providers' published formulas (Anthropic's
width x height / 750 after scaling into 1568 px; OpenAI's 85 + 170 per 512 px tile after
scaling into 2048 px and 768 px on the short side), whichever is larger; documents by their
extracted size: text as 4 characters a token, a PDF at `PDF_PAGE_TOKENS` a page (Anthropic's
figure for text plus the page image), DOCX/XLSX by their uncompressed XML.
"""

from __future__ import annotations

import io
import math
import re
import struct
import zipfile
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from turnkeep.providers.base import AttachmentPart, Message, Part, TextPart, ToolResultPart
from turnkeep.providers.capabilities import (
    BEDROCK_MAX_DOCUMENTS,
    BEDROCK_MAX_IMAGES,
    DOCUMENT_FORMATS,
    TEXT_FORMATS,
)
from turnkeep.providers.wire_attachments import omitted_text

IMAGE_RESEND_TURNS: Final = 2
"""Turns after the one an image came with that still re-send it."""
PDF_PAGE_TOKENS: Final = 3_000
"""Anthropic's upper figure for one PDF page (1,500-3,000 tokens of text, plus the page image)."""
CHARS_PER_TOKEN: Final = 4
UNKNOWN_IMAGE_TOKENS: Final = 1_600
"""An image whose dimensions are unknown (a reference without its bytes): about the most either
formula charges (Anthropic ~1,600 at 1.15 MP; OpenAI 1,445 at 2048 x 768)."""
PDF_BYTES_PER_PAGE: Final = 100_000
"""A PDF known by its size only: one page a 100 kB (a page of text is less, of scans more)."""
ZIP_RATIO: Final = 4
"""A DOCX/XLSX known by its size only: the XML is about four times the zip."""
_PDF_PAGE: Final = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, GIF, JPEG or WebP from its header, or None when unreadable."""
    try:
        if data.startswith(b"\x89PNG\r\n\x1a\n"):
            return struct.unpack(">II", data[16:24])
        if data[:6] in (b"GIF87a", b"GIF89a"):
            return struct.unpack("<HH", data[6:10])
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _webp_size(data)
        if data.startswith(b"\xff\xd8"):
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        return width, int.from_bytes(data[27:30], "little") + 1
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        length = struct.unpack(">H", data[at + 2 : at + 4])[0]
        # SOF0-SOF15 except DHT (C4), JPG (C8) and DAC (CC) carry the frame's size.
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def claude_image_tokens(width: int, height: int) -> int:
    """Anthropic's formula: scaled into 1568 px on the long edge and 1.15 megapixels, then
    w x h / 750 (so at most about 1,600 tokens)."""
    scale = min(1.0, 1568 / max(width, height, 1), math.sqrt(1_150_000 / max(width * height, 1)))
    return max(1, math.ceil(round(width * scale) * round(height * scale) / 750))


def openai_image_tokens(width: int, height: int) -> int:
    """OpenAI's high-detail formula: into 2048 x 2048, short side at most 768, 85 + 170 a tile."""
    scale = min(1.0, 2048 / max(width, height, 1))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / max(min(w, h), 1))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def attachment_tokens(part: AttachmentPart) -> int:
    """The tokens an attachment costs a request (the module docstring says how)."""
    if part.is_image:
        # An S3 source carries the record's dimensions instead of the header's bytes.
        size = image_size(part.data) or ((part.width, part.height) if part.width else None)
        if size is None:
            return UNKNOWN_IMAGE_TOKENS
        return max(claude_image_tokens(*size), openai_image_tokens(*size))
    fmt = DOCUMENT_FORMATS.get(part.media_type, "")
    if not part.data:
        return _reference_tokens(fmt, part.size)
    if fmt in TEXT_FORMATS:
        return -(-len(part.data.decode("utf-8", errors="replace")) // CHARS_PER_TOKEN)
    if fmt == "pdf":
        return max(1, len(_PDF_PAGE.findall(part.data))) * PDF_PAGE_TOKENS
    if fmt in ("docx", "xlsx"):
        return -(-_unzipped_xml(part.data) // CHARS_PER_TOKEN)
    return -(-max(part.size, len(part.data)) // CHARS_PER_TOKEN)


def _reference_tokens(fmt: str, size: int) -> int:
    """A document known by its reference only (the transcript's view, before the round's bytes
    are loaded): text by its size, a PDF at a page per `PDF_BYTES_PER_PAGE`, DOCX/XLSX as text
    `ZIP_RATIO` times their size."""
    if fmt == "pdf":
        return max(1, -(-size // PDF_BYTES_PER_PAGE)) * PDF_PAGE_TOKENS
    ratio = ZIP_RATIO if fmt in ("docx", "xlsx") else 1
    return -(-size * ratio // CHARS_PER_TOKEN)


def _unzipped_xml(data: bytes) -> int:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return sum(i.file_size for i in archive.infolist() if i.filename.endswith(".xml"))
    except (zipfile.BadZipFile, OSError):
        return len(data)


def attachment_view(
    messages: Sequence[Message],
    *,
    resend_turns: int = IMAGE_RESEND_TURNS,
    max_images: int = BEDROCK_MAX_IMAGES,
    max_documents: int = BEDROCK_MAX_DOCUMENTS,
) -> tuple[Message, ...]:
    """`messages` as a round sends them: attachments the policy retires become text references
    (images older than `resend_turns` turns; any beyond the per-request counts, oldest first)."""
    images = documents = 0
    turns_after = 0
    out: list[Message] = []
    for message in reversed(messages):
        parts: list[Part] = []
        for part in reversed(message.parts):
            found = _attachments_of(part)
            kept: list[AttachmentPart] = []
            for attachment in found:
                if attachment.is_image:
                    images += 1
                    fits = images <= max_images and turns_after <= resend_turns
                else:
                    documents += 1
                    fits = documents <= max_documents
                if fits:
                    kept.append(attachment)
            parts.append(_retire(part, kept))
        out.append(Message(message.role, tuple(reversed(parts))))
        if message.role == "user" and any(
            isinstance(p, TextPart | AttachmentPart) for p in message.parts
        ):
            turns_after += 1
    return tuple(reversed(out))


def _attachments_of(part: Part) -> list[AttachmentPart]:
    # Counted newest first within a message too, so the last image of a result is kept.
    if isinstance(part, AttachmentPart):
        return [part]
    if isinstance(part, ToolResultPart):
        return list(reversed(part.attachments))
    return []


def _retire(part: Part, kept: list[AttachmentPart]) -> Part:
    why = "was sent in an earlier round; not re-sent"
    if isinstance(part, AttachmentPart):
        return part if kept else TextPart(omitted_text(part, why))
    if isinstance(part, ToolResultPart) and len(kept) < len(part.attachments):
        gone = [a for a in part.attachments if a not in kept]
        notes = "".join("\n" + omitted_text(a, why) for a in gone)
        still = tuple(a for a in part.attachments if a in kept)
        return replace(part, content=part.content + notes, attachments=still)
    return part
