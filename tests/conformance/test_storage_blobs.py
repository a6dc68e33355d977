"""Conformance: a session's blobs (attachments' bytes) are stored with the session, isolated
from other sessions, deleted one by one and with the session, leaving no readable byte behind
(docs/storage.md "Blobs")."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conformance.backends import BackendHarness
from turnkeep.storage import (
    StorageClosedError,
    StorageValidationError,
    fork_session,
    set_value,
    value,
)

MARKER = b"BLOB-MARKER-7f3a9c-" * 64


def _files_holding(root: Path, needle: bytes) -> list[str]:
    found = []
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                if needle in handle.read():
                    found.append(path)
    return found


def _s3_keys(backend: BackendHarness) -> list[str]:
    from turnkeep.plumbing.clients import shared_client

    query = parse_qs(urlsplit(backend.url).query)
    s3 = shared_client("s3", query["region"][0])
    listed = s3.list_objects_v2(Bucket=query["bucket"][0])
    return [str(item["Key"]) for item in listed.get("Contents", [])]


def test_a_blob_reads_back_and_survives_a_reopen(backend: BackendHarness) -> None:
    storage = backend.open("s1")
    storage.commit([set_value(value("a"), 1)])
    storage.blobs().put("att-1", b"\x89PNG bytes")
    assert storage.blobs().get("att-1") == b"\x89PNG bytes"
    again = backend.reopen(storage)
    assert again.blobs().get("att-1") == b"\x89PNG bytes"
    assert again.blobs().get("att-2") is None


def test_a_blob_belongs_to_its_session_only(backend: BackendHarness) -> None:
    one, two = backend.open("s1"), backend.open("s2")
    one.blobs().put("att-1", b"one")
    assert two.blobs().get("att-1") is None
    two.blobs().put("att-1", b"two")
    assert one.blobs().get("att-1") == b"one"


def test_a_deleted_blob_is_gone_and_deleting_it_again_is_fine(backend: BackendHarness) -> None:
    storage = backend.open("s1")
    storage.blobs().put("att-1", b"x")
    storage.blobs().delete("att-1")
    storage.blobs().delete("att-1")
    assert storage.blobs().get("att-1") is None


def test_a_blob_name_with_a_slash_or_dots_is_refused(backend: BackendHarness) -> None:
    storage = backend.open("s1")
    for name in ("../escape", "a/b", "", "..", "x" * 129):
        with pytest.raises(StorageValidationError, match="blob name"):
            storage.blobs().put(name, b"x")


def test_blobs_of_a_closed_handle_are_refused(backend: BackendHarness) -> None:
    storage = backend.open("s1")
    storage.close()
    with pytest.raises(StorageClosedError):
        storage.blobs()


def test_deleting_the_session_leaves_no_blob_and_no_readable_byte(
    backend: BackendHarness, tmp_path: Path
) -> None:
    storage = backend.open("s1")
    storage.commit([set_value(value("a"), 1)])
    storage.blobs().put("att-1", MARKER)
    storage.blobs().put("att-2", b"second " + MARKER)
    backend.open("s2").blobs().put("att-1", b"kept")
    storage.close()
    if backend.name == "aws":
        assert any("/sessions/s1/attachments/" in key for key in _s3_keys(backend))
    repository = backend.repository()
    try:
        repository.delete_session("s1")
    finally:
        repository.close()
    reopened = backend.open("s1")
    assert reopened.blobs().get("att-1") is None
    assert reopened.blobs().get("att-2") is None
    assert backend.open("s2").blobs().get("att-1") == b"kept"
    assert _files_holding(tmp_path, MARKER[:40]) == []
    if backend.name == "aws":
        assert [k for k in _s3_keys(backend) if "/sessions/s1/" in k] == []


def test_a_deleted_blob_leaves_no_readable_byte_in_the_store_files(
    backend: BackendHarness, tmp_path: Path
) -> None:
    storage = backend.open("s1")
    storage.commit([set_value(value("a"), 1)])
    storage.blobs().put("att-1", MARKER)
    storage.blobs().delete("att-1")
    assert _files_holding(tmp_path, MARKER[:40]) == []


def test_blob_names_are_listed_and_a_fork_copies_the_blobs(backend: BackendHarness) -> None:
    source = backend.open("s1")
    source.commit([set_value(value("a"), 1)])
    source.blobs().put("att-b", b"bee")
    source.blobs().put("att-a", b"ay")
    assert source.blobs().names() == ["att-a", "att-b"]
    target = backend.open("s2")
    assert target.blobs().names() == []
    fork_session(source, target)
    assert target.blobs().names() == ["att-a", "att-b"]
    assert target.blobs().get("att-b") == b"bee"
