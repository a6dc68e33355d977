"""A sub-agent call's child session carries its parent's id in its envelope, written with the
envelope, on every envelope backend (docs/agent.md "Sub-agents", docs/envelope.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.envelope_backends import (
    BACKEND_NAMES,
    EnvelopeBackend,
    envelope_backend,
)
from turnkeep.envelope import EnvelopeStore, MetaValidationError


@pytest.fixture(params=BACKEND_NAMES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvelopeStore]:
    """A handle on each envelope backend in turn."""
    harness: EnvelopeBackend
    with envelope_backend(request.param, tmp_path) as harness:
        yield harness.store()


def test_a_child_session_created_with_its_parent_lists_with_the_parent_marker(
    store: EnvelopeStore,
) -> None:
    store.create("s-parent", "alice", {"title": "Trip"})
    created = store.create("sub-1", "alice", {"title": "child"}, parent_session_id="s-parent")

    assert created.parent_session_id == "s-parent"
    listed = {e.session_id: e.parent_session_id for e in store.list_for_owner("alice")}
    assert listed == {"s-parent": None, "sub-1": "s-parent"}
    again = store.get("sub-1")
    assert again is not None
    assert again.parent_session_id == "s-parent"
    assert again.host_meta() == {"title": "child"}


def test_the_parent_marker_survives_a_host_put_and_worker_writes(store: EnvelopeStore) -> None:
    store.create("sub-1", "alice", {"title": "child"}, parent_session_id="s-parent")

    store.put_host_meta("sub-1", "alice", {})
    store.update_worker_meta("sub-1", {"turnStatus": "running", "turnRunId": "op-1"})
    store.update_worker_meta("sub-1", {"turnStatus": None, "turnRunId": None})

    got = store.get("sub-1")
    assert got is not None
    assert got.parent_session_id == "s-parent"
    assert got.meta == {"parentSessionId": "s-parent"}


def test_a_host_put_naming_the_parent_marker_is_refused_and_writes_nothing(
    store: EnvelopeStore,
) -> None:
    store.create("s-1", "alice", {"title": "mine"})

    with pytest.raises(MetaValidationError, match="parentSessionId"):
        store.put_host_meta("s-1", "alice", {"parentSessionId": "s-other"})

    got = store.get("s-1")
    assert got is not None
    assert got.parent_session_id is None
    assert got.meta == {"title": "mine"}


def test_a_parent_id_that_breaks_the_session_id_rule_is_refused_and_nothing_is_created(
    store: EnvelopeStore,
) -> None:
    with pytest.raises(MetaValidationError, match="session id"):
        store.create("sub-1", "alice", {}, parent_session_id="../escape")

    assert store.get("sub-1") is None
    assert store.list_for_owner("alice") == []
