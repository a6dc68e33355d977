"""Check an attachment from its bytes: the type from magic numbers (a mismatch with the name or
the declared type is refused), image dimensions, DOCX/XLSX expansion (zip bombs), a second
format hidden in the same bytes (polyglots), and the per-type size caps. Each refusal is one
line naming the file (docs/attachments.md, "Checks")."""

from __future__ import annotations

import io
import warnings
import zipfile
from dataclasses import dataclass
from typing import Final

from PIL import Image

from turnkeep.attachments import sniff
from turnkeep.attachments.errors import AttachmentRefused
from turnkeep.attachments.limits import DOCX, IMAGE_TYPES, XLSX, AttachmentLimits

_PIL_FORMATS: Final = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif"}
_PIL_FORMATS_WEBP: Final = {"WEBP": "image/webp"}
_OFFICE_PARTS: Final = {DOCX: "word/document.xml", XLSX: "xl/workbook.xml"}
_READ_CHUNK: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class CheckedFile:
    """What the checks decided: the media type and, for an image, its size in pixels."""

    media_type: str
    width: int | None = None
    height: int | None = None


def check_bytes(
    data: bytes, *, name: str, declared_type: str, limits: AttachmentLimits
) -> CheckedFile:
    """The checked type of `data` (uploaded as `name`, declared `declared_type`), or
    AttachmentRefused saying in one line why not."""
    declared = sniff.normalize_type(declared_type)
    found = _decided_type(data, declared, name)
    if found != declared:
        raise AttachmentRefused(
            f"{name!r}: declared {declared_type!r} but the bytes are {sniff.describe(found)}"
            f" ({found})"
        )
    by_name = sniff.type_of_name(name)
    if by_name is not None and by_name != found and not _both_text(by_name, found):
        raise AttachmentRefused(
            f"{name!r}: the name says {sniff.describe(by_name)} but the bytes are "
            f"{sniff.describe(found)} ({found})"
        )
    cap = limits.max_bytes(found)
    if len(data) > cap:
        raise AttachmentRefused(
            f"{name!r}: {sniff.describe(found)} of {len(data)} bytes is over the {cap}-byte cap"
        )
    _check_not_polyglot(data, found, name)
    if found in IMAGE_TYPES:
        width, height = _check_image(data, found, name, limits)
        return CheckedFile(found, width, height)
    if found in _OFFICE_PARTS:
        _check_office(data, found, name, limits)
    elif found == "application/pdf":
        _check_pdf(data, name)
    return CheckedFile(found)


def _both_text(a: str, b: str) -> bool:
    # A CSV named .txt (or Markdown named .text) is still text: the name picks no format.
    return a.startswith("text/") and b.startswith("text/") and "text/html" not in (a, b)


def _decided_type(data: bytes, declared: str, name: str) -> str:
    if not data:
        raise AttachmentRefused(f"{name!r}: the file is empty")
    magic = sniff.magic_type(data)
    if magic is None:
        if not sniff.is_text(data):
            raise AttachmentRefused(
                f"{name!r}: the bytes are no accepted format (PNG, JPEG, GIF, WebP, PDF, DOCX, "
                "XLSX, or UTF-8 text, Markdown, CSV, HTML)"
            )
        return sniff.text_type(data, declared, name)
    if not sniff.accepted(magic):
        raise AttachmentRefused(f"{name!r}: {sniff.describe(magic)} ({magic}) is not accepted")
    return magic


def _check_not_polyglot(data: bytes, found: str, name: str) -> None:
    """Refuse bytes that are also a second format: a ZIP appended to an image or a PDF (its
    directory is found from the end), or a PDF header inside another file's first KiB."""
    if found not in _OFFICE_PARTS and zipfile.is_zipfile(io.BytesIO(data)):
        raise AttachmentRefused(
            f"{name!r}: {sniff.describe(found)} whose bytes are also a ZIP archive (a polyglot)"
        )
    if found != "application/pdf" and b"%PDF-" in data[:1024]:
        raise AttachmentRefused(
            f"{name!r}: {sniff.describe(found)} whose bytes also hold a PDF header (a polyglot)"
        )


def _image_end(data: bytes, media_type: str) -> int:
    """Where the image's own bytes end (the rest is trailing data)."""
    if media_type == "image/png":
        at = data.rfind(b"IEND")
        return -1 if at < 0 else at + 8  # chunk type + CRC
    if media_type == "image/jpeg":
        return len(data.rstrip(b"\x00")) if data.rstrip(b"\x00").endswith(b"\xff\xd9") else -1
    if media_type == "image/gif":
        return len(data) if data.endswith(b"\x3b") else -1
    riff = int.from_bytes(data[4:8], "little") + 8
    return len(data) if riff in (len(data), len(data) - 1) else riff


def _check_image(
    data: bytes, media_type: str, name: str, limits: AttachmentLimits
) -> tuple[int, int]:
    if _image_end(data, media_type) != len(data):
        raise AttachmentRefused(
            f"{name!r}: {sniff.describe(media_type)} with data after its end (a polyglot or a "
            "damaged file)"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                formats = {**_PIL_FORMATS, **_PIL_FORMATS_WEBP}
                pil_type = formats.get(str(image.format))
                width, height = image.size
                image.verify()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise AttachmentRefused(f"{name!r}: the image has too many pixels") from None
    except Exception as exc:  # Pillow raises many kinds for a damaged file
        raise AttachmentRefused(f"{name!r}: the image cannot be read ({exc})") from None
    if pil_type != media_type:
        raise AttachmentRefused(f"{name!r}: the image decodes as {pil_type or 'nothing known'}")
    side = limits.image_side_px
    if width > side or height > side or width < 1 or height < 1:
        raise AttachmentRefused(
            f"{name!r}: the image is {width}×{height} px; each side must be 1 to {side} px"
        )
    return width, height


def _check_pdf(data: bytes, name: str) -> None:
    if b"%%EOF" not in data[-1024:]:
        raise AttachmentRefused(f"{name!r}: the PDF has no end marker (%%EOF): truncated?")


def _check_office(data: bytes, media_type: str, name: str, limits: AttachmentLimits) -> None:
    """A DOCX/XLSX must hold its main part and expand to at most `zip_expanded_bytes` in at most
    `zip_members` members: every member is decompressed with a running cap, so a header that
    lies about its size cannot get past it."""
    what = sniff.describe(media_type)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if len(members) > limits.zip_members:
                raise AttachmentRefused(
                    f"{name!r}: {what} with {len(members)} parts (at most {limits.zip_members})"
                )
            names = {member.filename for member in members}
            if _OFFICE_PARTS[media_type] not in names or "[Content_Types].xml" not in names:
                raise AttachmentRefused(f"{name!r}: {what} lacks {_OFFICE_PARTS[media_type]}")
            _expand_within(archive, members, name, what, limits)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, AttachmentRefused):
            raise
        raise AttachmentRefused(f"{name!r}: {what} that is not a readable ZIP ({exc})") from None


def _expand_within(
    archive: zipfile.ZipFile,
    members: list[zipfile.ZipInfo],
    name: str,
    what: str,
    limits: AttachmentLimits,
) -> None:
    budget = limits.zip_expanded_bytes
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > 1024 * 1024 and ratio > limits.zip_ratio:
            raise AttachmentRefused(
                f"{name!r}: {what} whose part {member.filename!r} expands {ratio:.0f}× "
                f"(at most {limits.zip_ratio}×): a zip bomb?"
            )
        with archive.open(member) as part:
            while chunk := part.read(_READ_CHUNK):
                budget -= len(chunk)
                if budget < 0:
                    raise AttachmentRefused(
                        f"{name!r}: {what} that expands past {limits.zip_expanded_bytes} bytes: "
                        "a zip bomb?"
                    )
