"""Limits on attachments, per attachment, per turn and per session (docs/attachments.md).

The per-attachment and per-turn values are Bedrock Converse's, from botocore's service model
(`bedrock-runtime` 2023-09-30, shape `Message`, member `content`): up to 20 images, each at
most 3.75 MB and 8000 × 8000 px; up to five documents, each at most 4.5 MB. The same limits
hold for the OpenAI-compatible provider, whose servers publish no common rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
DOCX: Final = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX: Final = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
TEXT_TYPES: Final = frozenset({"text/plain", "text/markdown", "text/csv", "text/html"})
DOCUMENT_TYPES: Final = frozenset({"application/pdf", DOCX, XLSX, *TEXT_TYPES})
ACCEPTED_TYPES: Final = IMAGE_TYPES | DOCUMENT_TYPES

MB: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class AttachmentLimits:
    """What one attachment, one turn and one session may hold."""

    image_bytes: int = int(3.75 * MB)
    image_side_px: int = 8000
    images_per_turn: int = 20
    document_bytes: int = int(4.5 * MB)
    documents_per_turn: int = 5
    session_bytes: int = 100 * MB
    """All of a session's attachments together (pending ones count: their size is declared)."""
    zip_expanded_bytes: int = 50 * MB
    """A DOCX/XLSX's members expanded together (a zip bomb expands far past it)."""
    zip_ratio: int = 100
    """The largest expansion ratio of one DOCX/XLSX member."""
    zip_members: int = 2000
    pending_seconds: int = 15 * 60
    """How long an attachment may stay pending (its upload URL expires sooner)."""
    upload_seconds: int = 10 * 60

    def max_bytes(self, media_type: str) -> int:
        """The per-attachment cap of `media_type`."""
        return self.image_bytes if media_type in IMAGE_TYPES else self.document_bytes

    @property
    def largest(self) -> int:
        """The largest attachment any type may be."""
        return max(self.image_bytes, self.document_bytes)


BEDROCK_LIMITS: Final = AttachmentLimits()
