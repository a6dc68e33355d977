"""A whole turn in which a function tool returns an image (docs/attachments.md, "Images from
tools"): the tool step keeps it through the deps' `ToolImageStore` and the transcript's result
refers to it; with no store the model is told in the result text that it is not shown."""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.support.attachment_samples import png_bytes
from tests.support.wire_turns import WireSession
from turnkeep import Agent, Image, tool
from turnkeep.harness.state import ToolImageRef
from turnkeep.providers.base import ToolResultPart
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import Storage


@tool
def chart() -> list[str | Image]:
    """Draw the chart."""
    return ["the chart:", Image(png_bytes(6, 5), "sales chart.png")]


@dataclass
class KeptImages:
    """A store keeping images in a dict; refuses one over `limit` bytes as a store's cap would."""

    limit: int = 10_000
    kept: dict[str, bytes] = field(default_factory=dict)

    def keep(self, storage: Storage, name: str, image: Image, *, key: str) -> ToolImageRef:
        if len(image.data) > self.limit:
            raise ValueError(f"{len(image.data)} bytes; at most {self.limit}")
        attachment_id = f"att-{len(self.kept):024x}"
        self.kept[attachment_id] = image.data
        return ToolImageRef(
            attachment_id=attachment_id,
            name=name,
            media_type=image.media_type,
            size=len(image.data),
        )


def _results(session: WireSession) -> list[ToolResultPart]:
    return [p for m, _ in session.entries() for p in m.parts if isinstance(p, ToolResultPart)]


def _session(store: KeptImages | None) -> WireSession:
    session = WireSession(ScriptedProvider())
    session.deps.agent = Agent(tools=[chart])
    session.deps.tool_images = store
    return session


def test_a_tools_image_is_kept_and_the_transcript_result_refers_to_it() -> None:
    store = KeptImages()
    session = _session(store)
    try:
        assert session.turn("call chart {}").status == "completed"

        (result,) = _results(session)
        (reference,) = result.attachments
        assert reference.name == "chart-1-sales-chart.png"
        assert reference.media_type == "image/png"
        assert reference.data == b""  # the transcript holds the reference only
        assert store.kept[reference.attachment_id] == png_bytes(6, 5)
        assert result.content == "the chart:"
    finally:
        session.close()


def test_an_image_the_store_refuses_is_a_note_in_the_result_and_the_turn_goes_on() -> None:
    session = _session(KeptImages(limit=10))
    try:
        assert session.turn("call chart {}").status == "completed"

        (result,) = _results(session)
        assert result.attachments == ()
        size = len(png_bytes(6, 5))
        note = f"[image chart-1-sales-chart.png not kept: {size} bytes; at most 10]"
        assert result.content == f"the chart:\n{note}"
    finally:
        session.close()


def test_without_a_store_the_model_is_told_the_image_is_not_shown() -> None:
    session = _session(None)
    try:
        assert session.turn("call chart {}").status == "completed"

        (result,) = _results(session)
        assert result.attachments == ()
        assert "not shown: this deployment keeps no tool images" in result.content
    finally:
        session.close()


def test_by_default_a_tools_image_becomes_a_ready_attachment_of_the_session() -> None:
    from tests.support.wire_turns import SESSION
    from turnkeep.attachments.store import AttachmentStore

    session = WireSession(ScriptedProvider())
    session.deps.agent = Agent(tools=[chart])
    try:
        assert session.turn("call chart {}").status == "completed"

        (result,) = _results(session)
        (reference,) = result.attachments
        storage = session.deps.open_storage(SESSION)
        try:
            store = AttachmentStore(storage)
            (record,) = store.records()
            data = storage.blobs().get(record.id)
        finally:
            storage.close()
        assert record.id == reference.attachment_id
        assert (record.status, record.media_type) == ("ready", "image/png")
        assert (record.width, record.height) == (6, 5)
        assert data == png_bytes(6, 5)
        assert "not shown" not in result.content
    finally:
        session.close()
