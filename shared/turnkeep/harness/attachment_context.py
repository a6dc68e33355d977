"""Load attachments' bytes into a round's request: the transcript holds references only
(`AttachmentPart` without data); when the harness builds a round's request, each reference the
context kept gets its checked bytes from the session's store. One deleted since it was sent
becomes a text note, so the model is told it was removed and the turn goes on
(docs/attachments.md, "In a turn"). Which rounds carry an attachment is the context policy's
choice (the providers' side); this module loads what the request holds."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from turnkeep.attachments import AttachmentNotReady, AttachmentStore
from turnkeep.harness.context import PreparedRound
from turnkeep.providers.base import AttachmentPart, Message, Part, TextPart, ToolResultPart
from turnkeep.storage import Storage


def removed_note(part: AttachmentPart) -> TextPart:
    """What the model sees instead of an attachment that was deleted."""
    return TextPart(f"[attachment {part.name!r} ({part.media_type}) was removed]")


@dataclass(frozen=True, slots=True)
class S3Sources:
    """Send attachments as their S3 objects (`s3Location`) in `region` instead of their bytes;
    `bucket_owner` is the bucket's account id ('' when unknown)."""

    region: str
    bucket_owner: str = ""


class _Loader:
    def __init__(self, storage: Storage, s3: S3Sources | None) -> None:
        self._store = AttachmentStore(storage)
        self._s3 = s3
        self._loaded: dict[str, AttachmentPart | None] = {}

    def attachment(self, part: AttachmentPart) -> AttachmentPart | None:
        if part.data or part.s3_uri:
            return part
        if part.attachment_id not in self._loaded:
            try:
                self._loaded[part.attachment_id] = self._fetch(part)
            except AttachmentNotReady:
                self._loaded[part.attachment_id] = None
        return self._loaded[part.attachment_id]

    def _fetch(self, part: AttachmentPart) -> AttachmentPart:
        if self._s3 is not None:
            located = self._store.locate(part, self._s3.region, self._s3.bucket_owner)
            if located is not None:
                return located
        return self._store.load(part)

    def part(self, part: Part) -> Part:
        if isinstance(part, AttachmentPart):
            return self.attachment(part) or removed_note(part)
        if isinstance(part, ToolResultPart) and part.attachments:
            kept = [self.attachment(a) for a in part.attachments]
            notes = [
                removed_note(a).text
                for a, k in zip(part.attachments, kept, strict=True)
                if k is None
            ]
            content = "\n".join([part.content, *notes]) if notes else part.content
            loaded = tuple(k for k in kept if k is not None)
            return dataclasses.replace(part, content=content, attachments=loaded)
        return part

    def message(self, message: Message) -> Message:
        if not any(_holds_attachment(p) for p in message.parts):
            return message
        return Message(message.role, tuple(self.part(p) for p in message.parts))


def _holds_attachment(part: Part) -> bool:
    return isinstance(part, AttachmentPart) or (
        isinstance(part, ToolResultPart) and bool(part.attachments)
    )


def with_attachment_bytes(
    prepared: PreparedRound, storage: Storage, s3: S3Sources | None = None
) -> PreparedRound:
    """`prepared` whose request carries every referenced attachment's bytes, or with `s3` its
    S3 object where the session's store is S3 in that region."""
    request = prepared.request
    if not any(_holds_attachment(p) for m in request.messages for p in m.parts):
        return prepared
    loader = _Loader(storage, s3)
    messages = tuple(loader.message(m) for m in request.messages)
    return dataclasses.replace(prepared, request=dataclasses.replace(request, messages=messages))
