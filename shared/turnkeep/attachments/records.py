"""An attachment's metadata as stored in the session's partition (a session value in namespace
`attachments`, key = the id): pending until its bytes arrive and pass the checks, then ready;
a pending one expires; a deleted one stays as a tombstone so transcripts show it removed
(docs/attachments.md)."""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from turnkeep.providers.base import AttachmentPart

NAMESPACE: Final = "attachments"
ID_PATTERN: Final = re.compile(r"att-[0-9a-f]{24}")
StoredStatus = Literal["pending", "ready", "refused", "deleted"]
Status = Literal["pending", "ready", "refused", "deleted", "expired"]


def new_attachment_id() -> str:
    """A fresh attachment id: `att-` and 24 random hex digits."""
    return "att-" + secrets.token_hex(12)


def derived_attachment_id(*origin: str) -> str:
    """The attachment id of what `origin` names (e.g. a tool call's n-th image): `att-` and 24
    hex digits of its SHA-256, the same on every delivery of that origin."""
    digest = hashlib.sha256("\x1f".join(("turnkeep-attachment", *origin)).encode()).hexdigest()
    return "att-" + digest[:24]


class AttachmentRecord(BaseModel):
    """One attachment of a session."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    name: str
    media_type: str
    size: int = Field(ge=0)
    sha256: str
    status: StoredStatus = "pending"
    created_at: int = Field(description="epoch ms")
    expires_at: int | None = Field(default=None, description="epoch ms; pending ones only")
    error: str | None = None
    width: int | None = None
    height: int | None = None

    def status_at(self, now_ms: int) -> Status:
        """The status as seen at `now_ms`: a pending one past its expiry is `expired`."""
        if self.status == "pending" and self.expires_at is not None and now_ms >= self.expires_at:
            return "expired"
        return self.status

    def counts_against_cap(self, now_ms: int) -> bool:
        """Whether the record's bytes count against the session's storage cap."""
        return self.status_at(now_ms) in ("pending", "ready")

    def equals(self, name: str, sha256: str, media_type: str) -> bool:
        """Whether this is the attachment of `name` with those bytes and that type."""
        return (self.name, self.sha256, self.media_type) == (name, sha256, media_type)

    def part(self, data: bytes = b"") -> AttachmentPart:
        """The message part referring to this attachment (with `data` when loaded)."""
        return AttachmentPart(self.id, self.name, self.media_type, self.size, data=data)
