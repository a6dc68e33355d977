"""Which attachments a model can take: the capability table per model family, and the check a
turn runs before its first round so an unsupported kind is refused up front, never by the
provider mid-turn (docs/attachments.md, "Models and kinds"; docs/providers.md).

The table is conservative: a family turnkeep does not know takes text only, and a spec may
declare more with its `attachments=` option (`images`, `documents`, `tool_images`, joined by
`+`, or `none`), e.g. `openai:http://127.0.0.1:11434/v1#llava?attachments=images`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final
from urllib.parse import parse_qsl

from turnkeep.providers.base import AttachmentPart, FatalModelError, Part, ToolResultPart

# The media types turnkeep accepts (docs/attachments.md), by their Converse format name.
IMAGE_FORMATS: Final = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
DOCUMENT_FORMATS: Final = {
    "application/pdf": "pdf",
    "text/plain": "txt",
    "text/markdown": "md",
    "text/csv": "csv",
    "text/html": "html",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
}
TEXT_FORMATS: Final = frozenset({"txt", "md", "csv", "html"})
"""Documents that are text: a provider without document parts gets them inline as text."""
ALL_DOCUMENTS: Final = frozenset(DOCUMENT_FORMATS.values())

# Per-request counts Bedrock Converse enforces (the Converse API reference, ImageBlock and
# DocumentBlock: at most 20 images and 5 documents a request).
BEDROCK_MAX_IMAGES: Final = 20
BEDROCK_MAX_DOCUMENTS: Final = 5

ATTACHMENT_UNSUPPORTED: Final = "attachment_unsupported"


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What one model family takes besides text.

    `documents`: the document formats it reads (Converse names: pdf, docx, txt, ...);
    `tool_images`: images inside a tool's result reach it; `s3_location`: Bedrock may pass
    an S3 object instead of the bytes; `max_images` / `max_documents`: per request.
    """

    family: str
    images: bool = False
    documents: frozenset[str] = frozenset()
    tool_images: bool = False
    s3_location: bool = False
    max_images: int | None = None
    max_documents: int | None = None


_NONE: Final = frozenset[str]()
# (pattern on the Bedrock model id, capabilities), first match wins; from AWS's "Supported models
# and model features" table for Converse (docs/attachments.md cites it). Tool-result images:
# the service model says Amazon Nova and Anthropic Claude 3 and 4 only.
_BEDROCK: Final = (
    (
        re.compile(r"anthropic\.claude-(?!v2|instant)"),
        Capabilities(
            "claude",
            True,
            ALL_DOCUMENTS,
            True,
            max_images=BEDROCK_MAX_IMAGES,
            max_documents=BEDROCK_MAX_DOCUMENTS,
        ),
    ),
    (re.compile(r"anthropic\.claude"), Capabilities("claude-2", documents=ALL_DOCUMENTS)),
    (re.compile(r"amazon\.nova-micro"), Capabilities("nova-micro", documents=ALL_DOCUMENTS)),
    (
        re.compile(r"amazon\.nova-(lite|pro|premier)"),
        Capabilities(
            "nova",
            True,
            ALL_DOCUMENTS,
            True,
            True,
            max_images=BEDROCK_MAX_IMAGES,
            max_documents=BEDROCK_MAX_DOCUMENTS,
        ),
    ),
    (
        re.compile(r"meta\.llama(3-2-(11|90)b|4)"),
        Capabilities(
            "llama-vision",
            True,
            ALL_DOCUMENTS,
            max_images=BEDROCK_MAX_IMAGES,
            max_documents=BEDROCK_MAX_DOCUMENTS,
        ),
    ),
    (re.compile(r"meta\.llama"), Capabilities("llama", documents=ALL_DOCUMENTS)),
    (
        re.compile(r"mistral\.pixtral"),
        Capabilities(
            "pixtral",
            True,
            ALL_DOCUMENTS,
            max_images=BEDROCK_MAX_IMAGES,
            max_documents=BEDROCK_MAX_DOCUMENTS,
        ),
    ),
    (re.compile(r"mistral\."), Capabilities("mistral", documents=ALL_DOCUMENTS)),
    (re.compile(r"cohere\.command-r"), Capabilities("command-r", documents=ALL_DOCUMENTS)),
)
_BEDROCK_FALLBACK: Final = Capabilities("bedrock-other")
# Chat Completions: `image_url` parts for vision models, `file` parts (PDF) on OpenAI's own
# models; text documents go inline as text to every model. Images a tool returned follow the
# tool messages in a user message (a `tool` message carries text only).
_OPENAI: Final = (
    (
        re.compile(r"^(gpt-4o|gpt-4\.1|gpt-5|o1(?!-mini)|o3|o4)"),
        Capabilities("gpt-vision", True, TEXT_FORMATS | {"pdf"}, True),
    ),
    (re.compile(r"^gpt-4-turbo"), Capabilities("gpt-4-turbo", True, TEXT_FORMATS, True)),
)
_OPENAI_FALLBACK: Final = Capabilities("openai-compatible", documents=TEXT_FORMATS)
SCRIPTED: Final = Capabilities("scripted", True, ALL_DOCUMENTS, True)
"""The scripted model describes what it received, so it takes every kind."""

_DECLARED: Final = ("images", "documents", "tool_images")


def capabilities_for(model_spec: str) -> Capabilities:
    """The capabilities of the model a provider spec names (docs/providers.md), with the
    spec's `attachments=` declaration applied. ValueError for a malformed declaration."""
    spec = model_spec.strip()
    head, _, query = spec.partition("?")
    kind, _, target = head.partition(":")
    if kind == "scripted":
        found = SCRIPTED
    elif kind == "bedrock":
        found = _lookup(_BEDROCK, target, _BEDROCK_FALLBACK)
    elif kind == "openai":
        found = openai_capabilities(target.partition("#")[2])
    else:
        found = Capabilities("unknown")
    declared = dict(parse_qsl(query)).get("attachments")
    return found if declared is None else _declare(found, declared)


def openai_capabilities(model: str) -> Capabilities:
    """The table's capabilities of a Chat Completions model name."""
    return _lookup(_OPENAI, model, _OPENAI_FALLBACK)


def _lookup(
    table: Iterable[tuple[re.Pattern[str], Capabilities]], name: str, fallback: Capabilities
) -> Capabilities:
    # Inference profiles (us.anthropic..., global.amazon...) and ARNs carry the model id inside.
    for pattern, capabilities in table:
        if pattern.search(name):
            return capabilities
    return fallback


def _declare(found: Capabilities, declared: str) -> Capabilities:
    words = {w.strip() for w in declared.split("+") if w.strip()}
    if words == {"none"}:
        return replace(found, images=False, documents=_NONE, tool_images=False)
    unknown = sorted(words - set(_DECLARED))
    if unknown or not words:
        raise ValueError(
            f"attachments={declared!r}: expected 'none' or some of {'+'.join(_DECLARED)}"
        )
    return replace(
        found,
        images="images" in words,
        documents=ALL_DOCUMENTS if "documents" in words else TEXT_FORMATS,
        tool_images="tool_images" in words,
    )


class AttachmentUnsupported(FatalModelError):
    """An attachment the model cannot take; `attachment_id` names it (None: a count limit)."""

    def __init__(self, message: str, attachment_id: str | None = None) -> None:
        super().__init__(message, code=ATTACHMENT_UNSUPPORTED)
        self.attachment_id = attachment_id


def check_attachments(model_spec: str, parts: Sequence[Part]) -> AttachmentUnsupported | None:
    """The refusal for the first attachment in `parts` (a turn's message parts, tool results'
    images included) that the spec's model cannot take, or None when it takes them all."""
    try:
        capabilities = capabilities_for(model_spec)
    except ValueError as exc:
        return AttachmentUnsupported(f"model {model_spec!r}: {exc}")
    images = documents = 0
    for part in parts:
        found = [part] if isinstance(part, AttachmentPart) else []
        in_tool = isinstance(part, ToolResultPart)
        if isinstance(part, ToolResultPart):
            found = list(part.attachments)
        for attachment in found:
            refused = _refusal(capabilities, attachment, in_tool=in_tool)
            if refused is not None:
                return AttachmentUnsupported(refused, attachment.attachment_id)
            images += attachment.is_image
            documents += not attachment.is_image
    return _count_refusal(capabilities, images, documents)


def _refusal(capabilities: Capabilities, part: AttachmentPart, *, in_tool: bool) -> str | None:
    what = f"attachment {part.attachment_id} ({part.name}, {part.media_type})"
    family = capabilities.family
    if part.is_image:
        if part.media_type not in IMAGE_FORMATS:
            return f"{what}: not an image type turnkeep sends (png, jpeg, gif, webp)"
        if not capabilities.images:
            return f"{what}: this model ({family}) does not take images"
        if in_tool and not capabilities.tool_images:
            return f"{what}: this model ({family}) does not take images in tool results"
        return None
    fmt = DOCUMENT_FORMATS.get(part.media_type)
    if fmt is None:
        return f"{what}: not a document type turnkeep sends (docs/attachments.md)"
    if in_tool:
        return f"{what}: tool results carry images only"
    if fmt not in capabilities.documents:
        return f"{what}: this model ({family}) does not take {fmt} documents"
    return None


def _count_refusal(
    capabilities: Capabilities, images: int, documents: int
) -> AttachmentUnsupported | None:
    for count, limit, what in (
        (images, capabilities.max_images, "images"),
        (documents, capabilities.max_documents, "documents"),
    ):
        if limit is not None and count > limit:
            return AttachmentUnsupported(
                f"{count} {what} in one turn: this model ({capabilities.family}) takes at most "
                f"{limit} a request"
            )
    return None
