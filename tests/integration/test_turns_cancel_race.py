"""A cancel answers `cancelling` only when it will take effect (issue #9: 1 in 60 races
answered 202 for a turn that then completed).

The envelope (where a cancel is marked) and storage (where the terminal record is committed)
are separate stores. Both orders of a cancel around finish_turn's commit are forced here
deterministically, at the exact points of the race.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.integration.turns_support import USER, Harness, StorageProxy, make_turn_harness
from turnkeep.harness import CancelResult, cancel_turn, run_turn
from turnkeep.harness.state import result_address
from turnkeep.storage import SetValue, Storage, Write

BACKENDS = ["memory", "sqlite"]


def _is_terminal_commit(writes: Sequence[Write]) -> bool:
    return any(
        isinstance(w, SetValue) and w.address.namespace == result_address("x").namespace
        for w in writes
    )


def test_a_cancel_landing_just_before_the_terminal_commit_does_not_claim_to_cancel(
    tmp_path: Path,
) -> None:
    cancels: list[CancelResult] = []
    holder: dict[str, Harness] = {}

    def cancel_before_terminal_commit(writes: Sequence[Write]) -> None:
        if _is_terminal_commit(writes) and not cancels:
            h = holder["h"]
            cancels.append(cancel_turn(h.deps, h.session_id, "op-race"))

    def wrap(storage: Storage) -> Any:
        return StorageProxy(storage, cancel_before_terminal_commit)

    h = holder["h"] = make_turn_harness(tmp_path, "sqlite", open_wrapper=wrap)

    result = run_turn(h.deps, h.session_id, USER, "hello", op_id="op-race")

    assert len(cancels) == 1
    # Honest either way: a cancel that said it took effect must have ended the turn aborted.
    assert (cancels[0].status == "cancelling") == (result.status == "aborted")
    assert cancels[0].status == "running"  # finish_turn had fenced its completion
    assert result.status == "completed"
    assert h.meta()["turnStatus"] == "completed"


class CancelBeforeFence:
    """An envelope store that lets a cancel land right before finish_turn's completion fence."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.harness: Harness | None = None
        self.cancels: list[CancelResult] = []

    def update_worker_meta(self, session_id: str, patch: Mapping[str, Any], **kwargs: Any) -> Any:
        if patch.get("turnFinishing") and not self.cancels and self.harness is not None:
            h = self.harness
            self.cancels.append(cancel_turn(h.deps, session_id, "op-race"))
        return self._inner.update_worker_meta(session_id, patch, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancel_landing_after_finish_read_the_envelope_aborts_the_turn(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    proxy = CancelBeforeFence(h.envelopes)
    proxy.harness = h
    h.deps.envelopes = proxy

    result = run_turn(h.deps, h.session_id, USER, "hello", op_id="op-race")

    assert [c.status for c in proxy.cancels] == ["cancelling"]
    assert result.status == "aborted"
    assert h.meta()["turnStatus"] == "aborted"
