"""Attachments: images and documents a person sends with a turn, checked from their bytes and
stored with the session (docs/attachments.md)."""

from turnkeep.attachments.checks import CheckedFile, check_bytes
from turnkeep.attachments.errors import (
    AttachmentError,
    AttachmentNotFound,
    AttachmentNotReady,
    AttachmentRefused,
)
from turnkeep.attachments.limits import BEDROCK_LIMITS, AttachmentLimits
from turnkeep.attachments.records import AttachmentRecord, new_attachment_id
from turnkeep.attachments.store import AttachmentStore

__all__ = [
    "BEDROCK_LIMITS",
    "AttachmentError",
    "AttachmentLimits",
    "AttachmentNotFound",
    "AttachmentNotReady",
    "AttachmentRecord",
    "AttachmentRefused",
    "AttachmentStore",
    "CheckedFile",
    "check_bytes",
    "new_attachment_id",
]
