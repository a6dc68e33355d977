"""The turn-start check of a turn's attachments against the model (docs/attachments.md,
"Models and kinds"): the harness and the API call it before the first round, so a kind the
model cannot take is a clear refusal (code `attachment_unsupported`), never a provider error
mid-turn."""

from __future__ import annotations

from collections.abc import Sequence

from turnkeep.harness.io import AttachmentRef
from turnkeep.providers.base import AttachmentPart
from turnkeep.providers.capabilities import AttachmentUnsupported, check_attachments

__all__ = ["AttachmentUnsupported", "check_attachments", "refusal_for"]


def refusal_for(model_spec: str, refs: Sequence[AttachmentRef]) -> AttachmentUnsupported | None:
    """The refusal for a turn's attachments on `model_spec` (None: the model takes them all)."""
    parts = [AttachmentPart(r.attachment_id, r.name, r.media_type, r.size) for r in refs]
    return check_attachments(model_spec, parts)
