"""A replay-safe tool call delivered again after a crash keeps its images once
(docs/attachments.md, "Images from tools"): the attachment id of a tool's image is derived
from the session, the operation, the call and the image's index, so the second delivery finds
the first one's attachments instead of storing the images again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.integration.turns_support import SimulatedCrash, StorageProxy, make_turn_harness
from tests.support.attachment_samples import png_bytes
from turnkeep import Image
from turnkeep.attachments.store import AttachmentStore
from turnkeep.harness import (
    ModelStepInput,
    StartTurnInput,
    ToolStepInput,
    model_step,
    resume_turn,
    start_turn,
    tool_step,
)
from turnkeep.providers.base import ToolResultPart
from turnkeep.storage import SetValue, Storage, Write
from turnkeep.tools.base import Tool, ToolContext, ToolResult

USER = "user-1"


class NoArgs(BaseModel):
    pass


def _two_charts(runs: list[int]) -> Tool[NoArgs]:
    def handler(_args: NoArgs, _ctx: ToolContext) -> ToolResult:
        runs.append(1)
        images = (Image(png_bytes(6, 5), "sales.png"), Image(png_bytes(3, 2), "costs.png"))
        return ToolResult("two charts", images=images)

    return Tool("charts", "draw two charts", NoArgs, handler, replay_safe=True)


class DieBeforeTheResultCommits:
    """Opens storage whose first commit of a done call with kept images dies: the images are
    stored, the result that refers to them is not (a crash between the two)."""

    def __init__(self) -> None:
        self.died = False

    def __call__(self, storage: Storage) -> StorageProxy:
        return StorageProxy(storage, self._before_commit)

    def _before_commit(self, writes: Sequence[Write]) -> None:
        for write in writes:
            if self.died or not isinstance(write, SetValue):
                continue
            data = write.value
            if isinstance(data, dict) and data.get("phase") == "done" and data.get("attachments"):
                self.died = True
                raise SimulatedCrash


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_tool_call_delivered_again_after_a_crash_keeps_one_attachment_per_image(
    tmp_path: Path, backend: str
) -> None:
    runs: list[int] = []
    crash = DieBeforeTheResultCommits()
    h = make_turn_harness(tmp_path, backend, tools=[_two_charts(runs)], open_wrapper=crash)
    op = "op-replay"
    start_turn(
        h.deps,
        StartTurnInput(session_id=h.session_id, op_id=op, user_id=USER, text="call charts {}"),
    )
    (call_id,) = model_step(
        h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=0)
    ).call_ids
    delivery = ToolStepInput(session_id=h.session_id, op_id=op, call_id=call_id)
    with pytest.raises(SimulatedCrash):
        tool_step(h.deps, delivery)

    again = tool_step(h.deps, delivery)  # the step's retry: the replay-safe tool runs again

    assert crash.died
    assert runs == [1, 1]
    assert again.replayed
    assert resume_turn(h.deps, h.session_id, op).status == "completed"
    with h.storage() as storage:
        records = AttachmentStore(storage).records()
        blobs = storage.blobs().names()
    assert sorted(r.name for r in records) == ["charts-1-sales.png", "charts-2-costs.png"]
    assert all(r.status == "ready" for r in records)
    assert sorted(blobs) == sorted(r.id for r in records)
    (result,) = [p for m in h.transcript() for p in m.parts if isinstance(p, ToolResultPart)]
    assert sorted(a.attachment_id for a in result.attachments) == sorted(r.id for r in records)
