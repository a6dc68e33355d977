"""Why an attachment is refused or cannot be used: one line each, naming the attachment."""

from __future__ import annotations


class AttachmentError(ValueError):
    """An attachment cannot be stored or used; `code` is the API's error code (docs/api.md)."""

    def __init__(self, message: str, *, code: str = "attachment_refused", status: int = 422):
        super().__init__(message)
        self.code = code
        self.status = status


class AttachmentRefused(AttachmentError):
    """The bytes (or the declared name, size, type or hash) fail a check (docs/attachments.md)."""


class AttachmentNotFound(AttachmentError):
    """No such attachment in this session (also another user's or session's: a 404 alike)."""

    def __init__(self, attachment_id: str) -> None:
        super().__init__(
            f"attachment {attachment_id!r} was not found in this session",
            code="attachment_not_found",
            status=404,
        )


class AttachmentNotReady(AttachmentError):
    """The attachment exists but is not `ready` (pending, expired, refused or deleted)."""

    def __init__(self, attachment_id: str, status: str, detail: str = "") -> None:
        tail = f": {detail}" if detail else ""
        super().__init__(
            f"attachment {attachment_id!r} is {status}, not ready{tail}",
            code="attachment_not_ready",
            status=409,
        )
