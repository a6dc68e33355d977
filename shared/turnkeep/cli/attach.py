"""`/attach PATH` in `turnkeep chat`: read a file, upload it as an attachment of the session
(locally into the store, with `--url` through the API's upload flow), and say its name, type
and size; the next message carries it (docs/attachments.md, "Clients")."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from turnkeep.attachments import AttachmentError, AttachmentStore
from turnkeep.attachments.limits import BEDROCK_LIMITS
from turnkeep.attachments.sniff import is_text, magic_type, type_of_name
from turnkeep.harness.io import AttachmentRef

if TYPE_CHECKING:
    from turnkeep.cli.remote import RemoteChat
    from turnkeep.harness.deps import HarnessDeps


class AttachFailed(Exception):
    """The file cannot be attached; the message is the one line the chat prints."""


@dataclass(frozen=True, slots=True)
class LocalFile:
    """A file read for upload: its name (no directories), guessed media type and bytes."""

    name: str
    media_type: str
    data: bytes

    @property
    def sha256(self) -> str:
        """The hex sha256 the upload declares."""
        return hashlib.sha256(self.data).hexdigest()


def read_file(path: str) -> LocalFile:
    """Read `path` (at most the largest attachment size, so a huge file is never loaded)."""
    expanded = os.path.expanduser(path.strip())
    try:
        size = os.path.getsize(expanded)
        if size > BEDROCK_LIMITS.largest:
            raise AttachFailed(
                f"{path}: {size} bytes; an attachment may be at most {BEDROCK_LIMITS.largest}"
            )
        with open(expanded, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise AttachFailed(f"{path}: {exc.strerror or exc}") from None
    name = os.path.basename(expanded)
    # The client's guess only; the server decides from the bytes and refuses a mismatch.
    guess = magic_type(data) or type_of_name(name) or ("text/plain" if is_text(data) else "")
    return LocalFile(name, guess or "application/octet-stream", data)


def attached_line(name: str, media_type: str, size: int) -> str:
    """What the chat prints for an attached file."""
    return f"[attached {name} ({media_type}, {size} bytes): sent with your next message]"


def attach_local(deps: HarnessDeps, session_id: str, path: str) -> AttachmentRef:
    """Store `path` as a ready attachment of the local session (AttachFailed with the reason)."""
    file = read_file(path)
    storage = deps.open_storage(session_id)
    try:
        store = AttachmentStore(storage)
        record = store.create(
            name=file.name, media_type=file.media_type, size=len(file.data), sha256=file.sha256
        )
        store.receive(record.id, file.data)
    except AttachmentError as exc:
        raise AttachFailed(str(exc)) from None
    finally:
        storage.close()
    return AttachmentRef(
        attachment_id=record.id, name=record.name, media_type=record.media_type, size=record.size
    )


def attach_remote(chat: RemoteChat, path: str) -> AttachmentRef:
    """Upload `path` through the API: declare, send the bytes where `upload` says (the API's
    PUT, or S3's presigned POST without the API's token), then read the checked attachment."""
    from turnkeep.cli.remote import RemoteApiError

    file = read_file(path)
    base = chat._session_path()
    try:
        created = chat._call(
            "POST",
            f"{base}/attachments",
            json={
                "name": file.name,
                "media_type": file.media_type,
                "size": len(file.data),
                "sha256": file.sha256,
            },
        )
        attachment, upload = created["attachment"], created["upload"]
        if upload["method"] == "PUT":
            record = chat._call("PUT", upload["url"], content=file.data, headers=upload["headers"])
        else:
            _post_to_store(upload, file)
            record = chat._call("GET", f"{base}/attachments/{attachment['id']}")
    except RemoteApiError as exc:
        raise AttachFailed(exc.message) from None
    if record.get("status") != "ready":
        raise AttachFailed(str(record.get("error") or f"the attachment is {record.get('status')}"))
    return AttachmentRef(
        attachment_id=record["id"],
        name=record["name"],
        media_type=record["media_type"],
        size=record["size"],
    )


def _post_to_store(upload: dict[str, Any], file: LocalFile) -> None:
    import httpx

    try:
        answer = httpx.post(
            upload["url"],
            data=upload.get("fields", {}),
            files={"file": (file.name, file.data, file.media_type)},
            timeout=60,
        )
    except httpx.HTTPError as exc:
        raise AttachFailed(f"{file.name}: the upload failed: {type(exc).__name__}") from None
    if not answer.is_success:
        raise AttachFailed(f"{file.name}: the store refused the upload ({answer.status_code})")
