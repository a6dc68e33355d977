"""The turn-start check of a turn's attachments against the model (docs/attachments.md,
"Models and kinds"): the harness and the API call it before the first round, so a kind the
model cannot take is a clear refusal (code `attachment_unsupported`), never a provider error
mid-turn."""

from __future__ import annotations

from turnkeep.providers.capabilities import AttachmentUnsupported, check_attachments

__all__ = ["AttachmentUnsupported", "check_attachments"]
