"""Attachments on the wire: Bedrock Converse `image` / `document` blocks and Chat Completions
`image_url` / `file` / text parts, built from checked bytes (docs/attachments.md, "On the wire").

A part reaching these functions carries its bytes (`AttachmentPart.data`, loaded by the
harness); one without them is a harness bug, refused with a clear error rather than sent empty.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from typing import Any, Final

from turnkeep.providers.base import AttachmentPart, FatalModelError
from turnkeep.providers.capabilities import DOCUMENT_FORMATS, IMAGE_FORMATS, TEXT_FORMATS

DOCUMENT_NAME_MAX: Final = 200
# Converse's DocumentBlock.name rule (botocore's service model documents it; the length bound is
# in the shape): alphanumerics, single whitespace, hyphens, parentheses, square brackets.
_NAME_REFUSED: Final = re.compile(r"[^A-Za-z0-9\s\-()\[\]]+")
_SPACES: Final = re.compile(r"\s+")


def document_name(name: str) -> str:
    """`name` made valid for Converse: the extension dropped (the block's `format` says it),
    every other character outside the rule a space, runs of spaces one, at most 200 long."""
    stem = name.rsplit(".", 1)[0] if "." in name.strip(".") else name
    cleaned = _SPACES.sub(" ", _NAME_REFUSED.sub(" ", stem)).strip()
    return cleaned[:DOCUMENT_NAME_MAX].strip() or "document"


def unique_document_names(messages: Iterable[dict[str, Any]]) -> None:
    """Give each document block of a request its own name (Converse refuses a request whose
    documents share one): later duplicates get ` (2)`, ` (3)`, ... within the length bound."""
    seen: set[str] = set()
    for message in messages:
        for block in message["content"]:
            for document in _documents(block):
                name = base = document["name"]
                count = 1
                while name.lower() in seen:
                    count += 1
                    suffix = f" ({count})"
                    name = base[: DOCUMENT_NAME_MAX - len(suffix)].rstrip() + suffix
                seen.add(name.lower())
                document["name"] = name


def _documents(block: dict[str, Any]) -> list[dict[str, Any]]:
    if "document" in block:
        return [block["document"]]
    result = block.get("toolResult")
    if result is None:
        return []
    return [item["document"] for item in result["content"] if "document" in item]


def _loaded(part: AttachmentPart) -> bytes:
    if not part.data:
        raise FatalModelError(
            f"attachment {part.attachment_id} ({part.name}) reached the provider without its "
            "bytes (docs/attachments.md)",
            code="attachment_missing",
        )
    return part.data


def converse_source(part: AttachmentPart) -> dict[str, Any]:
    """An image's or document's Converse `source`: `s3Location` where the harness located the
    part in the session's S3 prefix (docs/attachments.md, "S3 sources"), else the bytes."""
    if part.s3_uri:
        location = {"uri": part.s3_uri}
        if part.bucket_owner:
            location["bucketOwner"] = part.bucket_owner
        return {"s3Location": location}
    return {"bytes": _loaded(part)}


def converse_block(part: AttachmentPart) -> dict[str, Any]:
    """The Converse content block of an attachment (also valid inside a `toolResult`)."""
    if part.is_image:
        image_format = IMAGE_FORMATS[part.media_type]
        return {"image": {"format": image_format, "source": converse_source(part)}}
    document_format = DOCUMENT_FORMATS[part.media_type]
    document = {
        "format": document_format,
        "name": document_name(part.name),
        "source": converse_source(part),
    }
    return {"document": document}


def data_url(part: AttachmentPart) -> str:
    """A `data:` URL of the bytes: the only image URL turnkeep sends (no server fetches one)."""
    return f"data:{part.media_type};base64,{base64.b64encode(_loaded(part)).decode('ascii')}"


def chat_content_part(part: AttachmentPart, *, pdf_files: bool) -> dict[str, Any]:
    """The Chat Completions content part of an attachment: `image_url` for an image, `file` for
    a PDF where the server takes one (`pdf_files`), text documents inline as text."""
    if part.is_image:
        return {"type": "image_url", "image_url": {"url": data_url(part)}}
    fmt = DOCUMENT_FORMATS[part.media_type]
    if fmt == "pdf" and pdf_files:
        return {"type": "file", "file": {"filename": part.name, "file_data": data_url(part)}}
    if fmt in TEXT_FORMATS:
        text = _loaded(part).decode("utf-8", errors="replace")
        return {"type": "text", "text": f"[document {part.name} ({part.media_type})]\n{text}"}
    # The turn-start check refuses this kind for such a server (providers/capabilities.py).
    raise FatalModelError(
        f"attachment {part.attachment_id} ({part.name}, {part.media_type}) cannot be sent to a "
        "Chat Completions server that takes no such files",
        code="attachment_unsupported",
    )


def omitted_text(part: AttachmentPart, why: str) -> str:
    """The text that stands for an attachment not sent in this round (the context policy, or a
    model that cannot see images a tool returned)."""
    return f"[{_kind(part)} {part.name} ({part.media_type}, id {part.attachment_id}) {why}]"


def _kind(part: AttachmentPart) -> str:
    return "image" if part.is_image else "document"
