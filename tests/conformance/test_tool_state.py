"""Conformance: a session's tool state (`ToolContext.state`) is stored with the session on every
backend — written with a call's result, read back by a new handle, gone with the session."""

from __future__ import annotations

from tests.conformance.backends import BackendHarness
from turnkeep.storage import set_value, value
from turnkeep.tools.state import ToolState, load_state, state_writes


def _commit_state(backend: BackendHarness, session_id: str, change: dict[str, object]) -> None:
    storage = backend.open(session_id)
    state = ToolState(loader=lambda: load_state(storage))
    for key, item in change.items():
        if item is None:
            state.delete(key)
        else:
            state.set(key, item)  # type: ignore[arg-type]
    state.seal()
    # As the tool step does: the call's state writes ride in the commit of its result.
    storage.commit([set_value(value("call", "c1"), {"phase": "done"}), *state_writes(state)])


def test_tool_state_written_with_a_result_is_read_back_by_a_new_handle(
    backend: BackendHarness,
) -> None:
    _commit_state(backend, "pantry", {"stock": {"rice": 2}, "note": "dry", "empty": []})
    _commit_state(backend, "pantry", {"note": None, "stock": {"rice": 3, "oats": 1}})
    _commit_state(backend, "pantry", {"never-set": None})  # deleting an absent key is fine

    reopened = backend.open("pantry")
    assert load_state(reopened) == {"stock": {"rice": 3, "oats": 1}, "empty": []}


def test_tool_state_is_per_session_and_deleted_with_the_session(backend: BackendHarness) -> None:
    _commit_state(backend, "pantry", {"stock": {"rice": 2}})
    _commit_state(backend, "other", {"stock": {"tea": 1}})
    backend.close_all()

    repository = backend.repository()
    try:
        repository.delete_session("pantry")
    finally:
        repository.close()

    assert load_state(backend.open("pantry")) == {}
    assert load_state(backend.open("other")) == {"stock": {"tea": 1}}
