"""Images a tool returned, kept as attachments of the session (docs/attachments.md, "Images
from tools"): the tool step stores each through a `ToolImageStore` and the result's transcript
entry carries references only. An image the store refuses (a storage cap, a failed check) or
that no store takes is left out with a line in the result text saying why, so the model is
told and the turn goes on. The default store is `SessionAttachmentImages`: each image becomes
a ready attachment of the session, checked like an upload and deleted with the session.

A replay-safe call re-run after a crash returns its images again: each image's `key` (the
session, operation, call and index) is the same on every delivery, and the default store
derives the attachment id from it, so a second delivery finds the first one's attachments
instead of storing them twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from turnkeep.attachments.errors import AttachmentError
from turnkeep.attachments.records import derived_attachment_id
from turnkeep.attachments.store import AttachmentStore
from turnkeep.harness.state import ToolImageRef
from turnkeep.storage import Storage
from turnkeep.tools.images import Image


class ToolImageStore(Protocol):
    """Where the tool step keeps a tool's images."""

    def keep(self, storage: Storage, name: str, image: Image, *, key: str) -> ToolImageRef:
        """Store `image` as a ready attachment of `storage`'s session named `name`; ValueError
        with a one-line reason when it is refused. `key` names the image's origin (session,
        operation, call, index) and is the same on every delivery of the call: a store keeps
        one image per key."""
        ...


class SessionAttachmentImages:
    """The default `ToolImageStore`: a tool's image is declared, checked from its bytes and
    stored as a ready attachment of the session, under the same caps as an upload."""

    def keep(self, storage: Storage, name: str, image: Image, *, key: str) -> ToolImageRef:
        """Store `image` as attachment `derived_attachment_id(key)` (once per key); ValueError
        with the store's one-line reason when it is refused."""
        store = AttachmentStore(storage)
        try:
            record = store.keep(
                derived_attachment_id("tool-image", key),
                name=name,
                media_type=image.media_type,
                data=image.data,
            )
        except AttachmentError as exc:
            raise ValueError(str(exc)) from None
        return ToolImageRef(
            attachment_id=record.id,
            name=record.name,
            media_type=record.media_type,
            size=record.size,
        )


def keep_tool_images(
    store: ToolImageStore | None,
    storage: Storage,
    call_name: str,
    images: Sequence[Image],
    *,
    origin: str,
) -> tuple[list[ToolImageRef], list[str]]:
    """Keep `images` of the call `origin` (`session/op/call`, the same on every delivery): the
    references of those stored, and a note for each left out."""
    kept: list[ToolImageRef] = []
    notes: list[str] = []
    for index, image in enumerate(images):
        name = image_file_name(call_name, index, image)
        if store is None:
            notes.append(f"[image {name} not shown: this deployment keeps no tool images]")
            continue
        try:
            kept.append(store.keep(storage, name, image, key=f"{origin}/{index}"))
        except ValueError as exc:
            notes.append(f"[image {name} not kept: {exc}]")
    return kept, notes


def image_file_name(call_name: str, index: int, image: Image) -> str:
    """`<tool>-<n>-<image name>.<ext>`: a plain file name, whatever name the tool gave."""
    extension = image.media_type.removeprefix("image/")
    stem = image.name.rsplit(".", 1)[0] if "." in image.name else image.name
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in stem).strip("-")
    return f"{call_name}-{index + 1}-{cleaned or 'image'}.{extension}"
