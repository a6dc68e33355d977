"""The harness loads attachments' bytes into a round's request (the transcript holds only
references); one deleted since becomes a note that it was removed (docs/attachments.md)."""

from __future__ import annotations

import uuid

from tests.support import attachment_files as files
from turnkeep.attachments import AttachmentStore
from turnkeep.harness.attachment_context import with_attachment_bytes
from turnkeep.harness.context import ContextPlan, PreparedRound
from turnkeep.providers.base import (
    AttachmentPart,
    Message,
    ModelRequest,
    TextPart,
    ToolResultPart,
)
from turnkeep.storage import Storage, open_storage


def _prepared(*messages: Message) -> PreparedRound:
    plan = ContextPlan("none", (), (), None, 0, 0)
    return PreparedRound(ModelRequest(system="", messages=messages), plan)


def _ready(storage: Storage, data: bytes, name: str) -> AttachmentPart:
    store = AttachmentStore(storage)
    record = store.create(
        name=name, media_type="image/png", size=len(data), sha256=files.sha256(data)
    )
    return store.receive(record.id, data).part()


def test_references_in_user_messages_and_tool_results_get_their_bytes() -> None:
    storage = open_storage(f"memory://{uuid.uuid4().hex}", "s1")
    png = files.image()
    ref = _ready(storage, png, "shot.png")
    assert ref.data == b""
    loaded = with_attachment_bytes(
        _prepared(
            Message("user", (TextPart("look"), ref)),
            Message("tool", (ToolResultPart("c1", "grab", "ok", attachments=(ref,)),)),
        ),
        storage,
    )
    user, tool = loaded.request.messages
    assert user.parts[1] == AttachmentPart(
        ref.attachment_id, "shot.png", "image/png", len(png), png
    )
    result = tool.parts[0]
    assert isinstance(result, ToolResultPart)
    assert result.attachments[0].data == png


def test_a_deleted_attachment_becomes_a_removed_note_and_the_round_goes_on() -> None:
    storage = open_storage(f"memory://{uuid.uuid4().hex}", "s1")
    ref = _ready(storage, files.image(), "shot.png")
    AttachmentStore(storage).delete(ref.attachment_id)
    loaded = with_attachment_bytes(
        _prepared(
            Message("user", (TextPart("look"), ref)),
            Message("tool", (ToolResultPart("c1", "grab", "ok", attachments=(ref,)),)),
        ),
        storage,
    )
    user, tool = loaded.request.messages
    assert user.parts[1] == TextPart("[attachment 'shot.png' (image/png) was removed]")
    result = tool.parts[0]
    assert isinstance(result, ToolResultPart)
    assert result.attachments == ()
    assert result.content == "ok\n[attachment 'shot.png' (image/png) was removed]"


def test_a_request_without_attachments_is_returned_as_it_is() -> None:
    storage = open_storage(f"memory://{uuid.uuid4().hex}", "s1")
    prepared = _prepared(Message("user", (TextPart("hi"),)))
    assert with_attachment_bytes(prepared, storage) is prepared
