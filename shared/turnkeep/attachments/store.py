"""A session's attachments: declared (pending), received and checked (ready), listed, deleted
one by one, named by a turn and loaded for a model round. Metadata are session values in the
session's partition, the bytes the session's blobs (docs/attachments.md)."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from typing import Final

from turnkeep.attachments import sniff
from turnkeep.attachments.checks import check_bytes
from turnkeep.attachments.errors import AttachmentNotFound, AttachmentNotReady, AttachmentRefused
from turnkeep.attachments.limits import BEDROCK_LIMITS, IMAGE_TYPES, AttachmentLimits
from turnkeep.attachments.records import (
    ID_PATTERN,
    NAMESPACE,
    AttachmentRecord,
    new_attachment_id,
)
from turnkeep.providers.base import AttachmentPart
from turnkeep.storage import Storage, delete_value, set_value, value
from turnkeep.storage.blobs import UploadForm

_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_NAME_MAX: Final = 255
_SWEEP_BATCH: Final = 25
"""Records deleted per commit: well within one DynamoDB transaction (100 items, some of them
the commit's own)."""


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def check_name(name: str) -> str:
    """`name` if it is a usable file name (1-255 characters, no path, no control characters)."""
    if not name or len(name) > _NAME_MAX or name.strip() != name:
        raise AttachmentRefused(f"name {name!r}: must be 1-{_NAME_MAX} characters, not padded")
    if any(ch in name for ch in "/\\") or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise AttachmentRefused(f"name {name!r}: a file name only (no path, no control characters)")
    return name


class AttachmentStore:
    """The attachments of one session's storage."""

    def __init__(
        self,
        storage: Storage,
        *,
        limits: AttachmentLimits = BEDROCK_LIMITS,
        clock: Callable[[], int] = _wall_ms,
    ) -> None:
        self.storage = storage
        self.limits = limits
        self._now = clock

    # -- reads ------------------------------------------------------------------------------

    def get(self, attachment_id: str) -> AttachmentRecord | None:
        """The record of `attachment_id`, or None (also for a malformed id)."""
        if not isinstance(attachment_id, str) or ID_PATTERN.fullmatch(attachment_id) is None:
            return None
        stored = self.storage.get_value(value(NAMESPACE, attachment_id))
        return None if stored is None else AttachmentRecord.model_validate(stored.value)

    def records(self, *, include_deleted: bool = False) -> list[AttachmentRecord]:
        """The session's attachments, oldest first (deleted ones only when asked)."""
        records = [
            AttachmentRecord.model_validate(stored.value)
            for stored in self.storage.scan_values(NAMESPACE)
        ]
        if not include_deleted:
            records = [r for r in records if r.status != "deleted"]
        return sorted(records, key=lambda r: (r.created_at, r.id))

    def stored_bytes(self) -> int:
        """Bytes the session's attachments hold or have declared (pending and ready ones)."""
        now = self._now()
        return sum(r.size for r in self.records() if r.counts_against_cap(now))

    def sweep(self) -> list[str]:
        """Delete every expired pending attachment, bytes first (on S3: bytes uploaded but
        never checked), then its record; the ids swept. Its upload form expired before it
        did, so no byte can arrive after (docs/attachments.md, "Expired uploads")."""
        return self._sweep()[0]

    def _sweep(self) -> tuple[list[str], list[AttachmentRecord]]:
        """The ids swept and the records left (one read of the namespace for both)."""
        now = self._now()
        records = self.records()
        expired = [r.id for r in records if r.status_at(now) == "expired"]
        blobs = self.storage.blobs()
        for attachment_id in expired:
            blobs.delete(attachment_id)
        for start in range(0, len(expired), _SWEEP_BATCH):
            batch = expired[start : start + _SWEEP_BATCH]
            self.storage.commit([delete_value(value(NAMESPACE, i)) for i in batch])
        return expired, [r for r in records if r.id not in expired]

    # -- declare, receive, finish -----------------------------------------------------------

    def create(
        self,
        *,
        name: str,
        media_type: str,
        size: int,
        sha256: str,
        attachment_id: str | None = None,
    ) -> AttachmentRecord:
        """Declare an attachment (pending until its bytes arrive); refusals name the field.
        `attachment_id` (default: a fresh one) replaces any record of that id, whose bytes then
        count against the session's cap no more."""
        check_name(name)
        if attachment_id is not None and ID_PATTERN.fullmatch(attachment_id) is None:
            raise ValueError(f"attachment id {attachment_id!r} is not att- and 24 hex digits")
        declared = sniff.normalize_type(media_type)
        if not sniff.accepted(declared):
            raise AttachmentRefused(
                f"{name!r}: media type {media_type!r} is not accepted (images: PNG, JPEG, GIF, "
                "WebP; documents: PDF, DOCX, XLSX, text, Markdown, CSV, HTML)"
            )
        if _SHA256.fullmatch(sha256) is None:
            raise AttachmentRefused(f"{name!r}: sha256 must be 64 lower-case hex digits")
        cap = self.limits.max_bytes(declared)
        if size < 1 or size > cap:
            raise AttachmentRefused(
                f"{name!r}: {size} bytes; {sniff.describe(declared)} may be 1 to {cap} bytes",
                code="attachment_too_large" if size > cap else "attachment_refused",
                status=413 if size > cap else 422,
            )
        _, kept = self._sweep()
        now = self._now()
        held = sum(r.size for r in kept if r.counts_against_cap(now) and r.id != attachment_id)
        if held + size > self.limits.session_bytes:
            raise AttachmentRefused(
                f"{name!r}: the session holds {held} bytes of attachments; {size} more would pass "
                f"its {self.limits.session_bytes}-byte cap (delete some first)",
                code="session_storage_full",
                status=413,
            )
        record = AttachmentRecord(
            id=attachment_id or new_attachment_id(),
            name=name,
            media_type=declared,
            size=size,
            sha256=sha256,
            created_at=now,
            expires_at=now + self.limits.pending_seconds * 1000,
        )
        self._save(record)
        return record

    def keep(
        self, attachment_id: str, *, name: str, media_type: str, data: bytes
    ) -> AttachmentRecord:
        """Store `data` as ready attachment `attachment_id` (a derived id), checked like an
        upload; idempotent: a ready one of that id with the same name and bytes is returned as
        it is, anything else of that id (a crashed delivery's leftovers) is replaced."""
        sha256 = hashlib.sha256(data).hexdigest()
        found = self.get(attachment_id)
        same = (name, sha256, media_type)
        if found is not None and found.status == "ready" and found.equals(*same):
            return found
        if found is not None:
            self.storage.blobs().delete(attachment_id)
        declared = self.create(
            name=name,
            media_type=media_type,
            size=len(data),
            sha256=sha256,
            attachment_id=attachment_id,
        )
        return self.receive(declared.id, data)

    def upload_form(self, record: AttachmentRecord) -> UploadForm | None:
        """A presigned direct upload where the store has one (S3), else None: PUT the bytes
        to the API's content URL."""
        return self.storage.blobs().upload_form(
            record.id,
            size=record.size,
            media_type=record.media_type,
            expires_in=self.limits.upload_seconds,
        )

    def receive(self, attachment_id: str, data: bytes) -> AttachmentRecord:
        """Check `data` as the bytes of pending `attachment_id`, store them, mark it ready."""
        record = self._pending(attachment_id)
        checked = self._checked(record, data)
        self.storage.blobs().put(record.id, data)
        return self._save(checked)

    def finish(self, attachment_id: str) -> AttachmentRecord:
        """A pending attachment whose bytes were uploaded straight to the store (S3) is checked
        now: ready, or refused with its bytes deleted. Others are returned as they are."""
        record = self.get(attachment_id)
        if record is None:
            raise AttachmentNotFound(attachment_id)
        if record.status_at(self._now()) != "pending":
            return record
        data = self.storage.blobs().get(record.id)
        if data is None:
            return record
        try:
            checked = self._checked(record, data)
        except AttachmentRefused:
            self.storage.blobs().delete(record.id)
            raise
        # Untagged before it is ready: a crash between the two leaves a pending record the
        # sweep deletes, never a ready attachment the lifecycle rule would expire.
        self.storage.blobs().settle(record.id)
        return self._save(checked)

    def delete(self, attachment_id: str) -> AttachmentRecord:
        """Delete the bytes; the record stays as `deleted` (a transcript shows it removed)."""
        record = self.get(attachment_id)
        if record is None or record.status == "deleted":
            raise AttachmentNotFound(attachment_id)
        self.storage.blobs().delete(record.id)
        return self._save(record.model_copy(update={"status": "deleted", "expires_at": None}))

    # -- turns --------------------------------------------------------------------------------

    def for_turn(self, attachment_ids: Sequence[str]) -> list[AttachmentPart]:
        """The parts of a turn naming `attachment_ids`: each must be this session's and ready,
        and the turn within the per-turn counts; else the error names the attachment."""
        if len(set(attachment_ids)) != len(attachment_ids):
            raise AttachmentRefused("attachments: an attachment is named twice")
        self.sweep()
        records = []
        for attachment_id in attachment_ids:
            record = self.finish(attachment_id)
            status = record.status_at(self._now())
            if status != "ready":
                raise AttachmentNotReady(attachment_id, status, record.error or "")
            records.append(record)
        images = sum(1 for r in records if r.media_type in IMAGE_TYPES)
        documents = len(records) - images
        if images > self.limits.images_per_turn or documents > self.limits.documents_per_turn:
            raise AttachmentRefused(
                f"attachments: {images} images and {documents} documents; a turn takes at most "
                f"{self.limits.images_per_turn} images and {self.limits.documents_per_turn} "
                "documents"
            )
        return [record.part() for record in records]

    def load(self, part: AttachmentPart) -> AttachmentPart:
        """`part` with its checked bytes (AttachmentNotReady when they were deleted)."""
        record = self.get(part.attachment_id)
        data = None if record is None else self.storage.blobs().get(part.attachment_id)
        if record is None or data is None or record.status != "ready":
            status = "deleted" if record is None else record.status
            raise AttachmentNotReady(part.attachment_id, status)
        return AttachmentPart(part.attachment_id, part.name, part.media_type, part.size, data)

    def locate(self, part: AttachmentPart, region: str, owner: str = "") -> AttachmentPart | None:
        """`part` as its S3 object (`s3_uri`, `bucket_owner`, the record's dimensions) where the
        store is S3 in `region`, else None (load the bytes instead). AttachmentNotReady when
        the attachment is no longer ready; a ready record's object exists (bytes are deleted
        only with the record marked deleted, `delete`)."""
        location = self.storage.blobs().location(part.attachment_id)
        if location is None or location.region != region:
            return None
        record = self.get(part.attachment_id)
        if record is None or record.status != "ready":
            status = "deleted" if record is None else record.status
            raise AttachmentNotReady(part.attachment_id, status)
        return AttachmentPart(
            part.attachment_id,
            part.name,
            part.media_type,
            part.size,
            s3_uri=location.uri,
            bucket_owner=owner,
            width=record.width or 0,
            height=record.height or 0,
        )

    # -- helpers ------------------------------------------------------------------------------

    def _pending(self, attachment_id: str) -> AttachmentRecord:
        record = self.get(attachment_id)
        if record is None or record.status == "deleted":
            raise AttachmentNotFound(attachment_id)
        status = record.status_at(self._now())
        if status != "pending":
            raise AttachmentNotReady(attachment_id, status, "its bytes were already taken")
        return record

    def _checked(self, record: AttachmentRecord, data: bytes) -> AttachmentRecord:
        try:
            if len(data) != record.size:
                raise AttachmentRefused(
                    f"{record.name!r}: {len(data)} bytes arrived; {record.size} were declared",
                    code="attachment_size_mismatch",
                    status=413 if len(data) > record.size else 422,
                )
            if hashlib.sha256(data).hexdigest() != record.sha256:
                raise AttachmentRefused(f"{record.name!r}: the bytes do not match the sha256")
            checked = check_bytes(
                data, name=record.name, declared_type=record.media_type, limits=self.limits
            )
        except AttachmentRefused as exc:
            self._save(record.model_copy(update={"status": "refused", "error": str(exc)}))
            raise
        return record.model_copy(
            update={
                "status": "ready",
                "expires_at": None,
                "width": checked.width,
                "height": checked.height,
            }
        )

    def _save(self, record: AttachmentRecord) -> AttachmentRecord:
        self.storage.commit([set_value(value(NAMESPACE, record.id), record.model_dump())])
        return record
