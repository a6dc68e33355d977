"""The media type of an attachment, decided from its bytes (magic numbers via `filetype`; text
by decoding), and the type a file name or a declared type stands for (docs/attachments.md)."""

from __future__ import annotations

import os
import re
from typing import Final

import filetype  # type: ignore[import-untyped]  # no stubs; guess() reads the first 8 KiB

from turnkeep.attachments.limits import ACCEPTED_TYPES, DOCX, TEXT_TYPES, XLSX

_BY_EXTENSION: Final = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".pdf": "application/pdf",
    ".docx": DOCX,
    ".xlsx": XLSX,
    ".txt": "text/plain",
    ".text": "text/plain",
    ".log": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".html": "text/html",
    ".htm": "text/html",
}
_ALIASES: Final = {"image/jpg": "image/jpeg", "text/x-markdown": "text/markdown"}
_TEXT_CONTROLS: Final = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")
"""Control bytes text may not hold (tab, newlines and form feed are fine): one regex scan of
the bytes, ~100x faster than a per-character loop (bench/attachment_checks_bench.py)."""

SHORT_NAMES: Final = {
    "image/png": "a PNG image",
    "image/jpeg": "a JPEG image",
    "image/gif": "a GIF image",
    "image/webp": "a WebP image",
    "application/pdf": "a PDF",
    DOCX: "a DOCX document",
    XLSX: "an XLSX workbook",
    "text/plain": "plain text",
    "text/markdown": "Markdown text",
    "text/csv": "CSV text",
    "text/html": "HTML",
    "application/zip": "a ZIP archive",
}


def describe(media_type: str) -> str:
    """A reader's name for `media_type` ("a PDF"), else the type itself."""
    return SHORT_NAMES.get(media_type, media_type)


def normalize_type(media_type: str) -> str:
    """`media_type` lower-cased, parameters dropped, common aliases mapped."""
    bare = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(bare, bare)


def type_of_name(name: str) -> str | None:
    """The accepted media type a file name's extension stands for, if any."""
    return _BY_EXTENSION.get(os.path.splitext(name)[1].lower())


def magic_type(data: bytes) -> str | None:
    """The binary format the leading bytes show (None when no magic number matches)."""
    kind = filetype.guess(data)
    return None if kind is None else str(kind.mime)


def is_text(data: bytes) -> bool:
    """Whether `data` is UTF-8 text without NULs or other control bytes (tab, newlines and
    form feed allowed): what plain text, Markdown, CSV and HTML attachments must be."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _TEXT_CONTROLS.search(data) is None


def looks_like_html(data: bytes) -> bool:
    """Whether the text starts like an HTML document (a doctype or an `<html` tag)."""
    head = data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return head.startswith((b"<!doctype html", b"<html"))


def text_type(data: bytes, declared: str, name: str) -> str:
    """The text type of text bytes: HTML when they look like it, else the declared text type,
    else the name's, else plain text."""
    if looks_like_html(data):
        return "text/html"
    for candidate in (declared, type_of_name(name) or ""):
        if candidate in TEXT_TYPES and candidate != "text/html":
            return candidate
    return "text/plain"


def accepted(media_type: str) -> bool:
    """Whether turnkeep takes attachments of `media_type`."""
    return media_type in ACCEPTED_TYPES
