"""Deleting a session deletes its sub-agent child sessions (and theirs) with everything stored
for them, on every storage backend with the envelope store it runs with (docs/api.md
`DELETE /sessions/{id}`, docs/agent.md "Sub-agents")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conformance.backends import BackendHarness
from turnkeep.envelope import EnvelopeStore, open_envelope_store
from turnkeep.harness.session_removal import descendant_ids, remove_session_tree
from turnkeep.storage import (
    StorageStats,
    append_list,
    ephemeral_scope,
    insert_entry,
    set_value,
    value,
    value_list,
)

OWNER = "alice"
TREE = {"s-parent": None, "sub-a": "s-parent", "sub-a1": "sub-a", "sub-b": "s-parent"}
"""session id -> parent: a parent with two children, one of which has a child of its own."""


def _envelope_url(backend: BackendHarness) -> str:
    """The envelope store each storage backend runs with (as `turnkeep serve` and the
    template pair them): DynamoDB on the same table, SQLite in the same file, else memory."""
    if backend.url.startswith("aws://"):
        query = parse_qs(urlsplit(backend.url).query)
        return f"aws://?table={query['table'][0]}&region={query['region'][0]}"
    if backend.url.startswith("sqlite://"):
        return backend.url
    return f"memory://tree-{uuid.uuid4().hex}"


@pytest.fixture
def envelopes(backend: BackendHarness) -> Iterator[EnvelopeStore]:
    """The backend's envelope store, closed after the test."""
    store = open_envelope_store(_envelope_url(backend))
    try:
        yield store
    finally:
        store.close()


def _fill(backend: BackendHarness, envelopes: EnvelopeStore, session_id: str) -> None:
    envelopes.create(session_id, OWNER, {"title": session_id}, parent_session_id=TREE[session_id])
    storage = backend.open(session_id)
    scope = ephemeral_scope("op-1")
    storage.commit(
        [
            insert_entry("e1", None, "message", {"text": session_id}),
            set_value(value("subagent.parent", "link"), {"session": session_id}),
        ]
    )
    storage.commit(
        [set_value(value("m", "", scope), session_id), append_list(value_list("f", "", scope), 1)]
    )
    storage.blobs().put("att-1", f"bytes of {session_id}".encode())
    storage.close()


def _aws_leftovers(backend: BackendHarness, session_ids: list[str]) -> list[str]:
    """Every DynamoDB item and S3 object of the backend's table and bucket naming one of
    `session_ids` (the whole table scanned, the whole bucket listed)."""
    from turnkeep.plumbing.clients import shared_client

    query = parse_qs(urlsplit(backend.url).query)
    region = query["region"][0]
    dynamodb, s3 = shared_client("dynamodb", region), shared_client("s3", region)
    items = [
        str(item)
        for page in dynamodb.get_paginator("scan").paginate(TableName=query["table"][0])
        for item in page["Items"]
    ]
    keys = [
        str(obj["Key"])
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=query["bucket"][0])
        for obj in page.get("Contents", [])
    ]
    return [found for found in items + keys if any(s in found for s in session_ids)]


def test_deleting_a_parent_removes_every_descendant_session_and_all_it_stored(
    backend: BackendHarness, envelopes: EnvelopeStore
) -> None:
    for session_id in TREE:
        _fill(backend, envelopes, session_id)
    envelopes.create("s-other", OWNER, {"title": "kept"})
    backend.open("s-other").commit([insert_entry("e1", None, "message")])
    repository = backend.repository()
    try:
        removed = remove_session_tree(envelopes, repository, OWNER, "s-parent")
        left = repository.list_sessions()
    finally:
        repository.close()

    assert sorted(removed) == ["sub-a", "sub-a1", "sub-b"]
    assert left == ["s-other"]
    assert [e.session_id for e in envelopes.list_for_owner(OWNER)] == ["s-other"]
    for session_id in TREE:
        gone = backend.open(session_id)
        assert envelopes.get(session_id) is None
        assert gone.get_entries(["e1"]) == []
        assert gone.get_value(value("subagent.parent", "link")) is None
        assert gone.get_value(value("m", "", ephemeral_scope("op-1"))) is None
        assert gone.blobs().get("att-1") is None
        assert gone.get_stats() == StorageStats()
    if backend.name == "aws":
        assert _aws_leftovers(backend, list(TREE)) == []
    kept = backend.open("s-other")
    assert [e.id for e in kept.get_entries(["e1"])] == ["e1"]


def test_deleting_a_child_session_leaves_its_parent_and_siblings(
    backend: BackendHarness, envelopes: EnvelopeStore
) -> None:
    for session_id in TREE:
        _fill(backend, envelopes, session_id)
    repository = backend.repository()
    try:
        removed = remove_session_tree(envelopes, repository, OWNER, "sub-a")
        left = repository.list_sessions()
    finally:
        repository.close()

    assert removed == ["sub-a1"]
    assert left == ["s-parent", "sub-b"]
    assert envelopes.get("s-parent") is not None
    assert backend.open("sub-b").blobs().get("att-1") == b"bytes of sub-b"


def test_descendants_come_deepest_first_and_a_cycle_in_stored_markers_ends() -> None:
    from turnkeep.envelope import MemoryEnvelopeStore

    store = MemoryEnvelopeStore()
    for session_id, parent in TREE.items():
        store.create(session_id, OWNER, parent_session_id=parent)
    store.create("loop-1", OWNER, parent_session_id="loop-2")
    store.create("loop-2", OWNER, parent_session_id="loop-1")
    listed = store.list_for_owner(OWNER)

    assert descendant_ids(listed, "s-parent") == ["sub-a1", "sub-a", "sub-b"]
    assert descendant_ids(listed, "loop-1") == ["loop-2"]
    assert descendant_ids(listed, "sub-b") == []
