"""Conformance: attachments stored with the session on every backend: declared pending,
received and checked to ready, listed, refused with the reason kept, expired when pending too
long, deleted one by one (the record stays as removed) and with the session
(docs/attachments.md)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conformance.backends import BackendHarness
from tests.support import attachment_files as files
from turnkeep.attachments import (
    AttachmentLimits,
    AttachmentNotFound,
    AttachmentNotReady,
    AttachmentRefused,
    AttachmentStore,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _declare(
    store: AttachmentStore, data: bytes, name: str = "shot.png", media_type: str = "image/png"
):  # type: ignore[no-untyped-def]
    return store.create(name=name, media_type=media_type, size=len(data), sha256=files.sha256(data))


def test_an_attachment_goes_from_pending_to_ready_and_reads_back_after_a_reopen(
    backend: BackendHarness,
) -> None:
    png = files.image("PNG", (20, 10))
    store = AttachmentStore(backend.open("s1"))
    record = _declare(store, png)
    assert record.id.startswith("att-")
    assert record.status == "pending"
    ready = store.receive(record.id, png)
    assert (ready.status, ready.width, ready.height) == ("ready", 20, 10)
    again = AttachmentStore(backend.reopen(store.storage))
    assert [r.id for r in again.records()] == [record.id]
    [part] = again.for_turn([record.id])
    assert again.load(part).data == png


def test_a_refused_upload_keeps_its_reason_and_stores_no_bytes(backend: BackendHarness) -> None:
    store = AttachmentStore(backend.open("s1"))
    pdf = files.pdf()
    record = _declare(store, pdf, "shot.png", "image/png")
    with pytest.raises(AttachmentRefused, match="bytes are a PDF"):
        store.receive(record.id, pdf)
    refused = store.get(record.id)
    assert refused is not None
    assert refused.status == "refused"
    assert "bytes are a PDF" in (refused.error or "")
    assert store.storage.blobs().get(record.id) is None
    with pytest.raises(AttachmentNotReady, match="is refused"):
        store.for_turn([record.id])


def test_bytes_that_differ_from_the_declared_size_or_hash_are_refused(
    backend: BackendHarness,
) -> None:
    store = AttachmentStore(backend.open("s1"))
    png = files.image()
    record = _declare(store, png)
    with pytest.raises(AttachmentRefused, match=r"bytes arrived; \d+ were declared"):
        store.receive(record.id, png + b"x")
    other = _declare(store, png)
    with pytest.raises(AttachmentRefused, match="do not match the sha256"):
        store.receive(other.id, png[:-5] + bytes([png[-5] ^ 1]) + png[-4:])


def test_a_pending_attachment_expires(backend: BackendHarness) -> None:
    clock = Clock()
    store = AttachmentStore(backend.open("s1"), clock=clock)
    png = files.image()
    record = _declare(store, png)
    clock.now += store.limits.pending_seconds * 1000
    with pytest.raises(AttachmentNotReady, match="is expired"):
        store.receive(record.id, png)
    assert store.stored_bytes() == 0


def test_the_session_storage_cap_refuses_the_attachment_that_would_pass_it(
    backend: BackendHarness,
) -> None:
    store = AttachmentStore(backend.open("s1"), limits=AttachmentLimits(session_bytes=1000))
    png = files.image()
    _declare(store, png)
    with pytest.raises(AttachmentRefused, match="1000-byte cap") as refused:
        store.create(name="b.png", media_type="image/png", size=999, sha256="0" * 64)
    assert refused.value.status == 413


def test_another_sessions_attachment_is_not_found(backend: BackendHarness) -> None:
    png = files.image()
    mine = AttachmentStore(backend.open("s1"))
    record = _declare(mine, png)
    mine.receive(record.id, png)
    theirs = AttachmentStore(backend.open("s2"))
    with pytest.raises(AttachmentNotFound, match=record.id):
        theirs.for_turn([record.id])


def test_a_deleted_attachment_keeps_a_removed_record_and_no_bytes(backend: BackendHarness) -> None:
    png = files.image()
    store = AttachmentStore(backend.open("s1"))
    record = _declare(store, png)
    store.receive(record.id, png)
    store.delete(record.id)
    assert store.records() == []
    [kept] = store.records(include_deleted=True)
    assert kept.status == "deleted"
    assert store.storage.blobs().get(record.id) is None
    with pytest.raises(AttachmentNotReady, match="is deleted"):
        store.load(record.part())
    with pytest.raises(AttachmentNotFound):
        store.delete(record.id)


def test_a_turn_takes_at_most_the_per_turn_counts(backend: BackendHarness) -> None:
    store = AttachmentStore(backend.open("s1"), limits=AttachmentLimits(images_per_turn=1))
    ids = []
    for color in ("red", "blue"):
        png = files.image(color=color)
        record = _declare(store, png)
        store.receive(record.id, png)
        ids.append(record.id)
    with pytest.raises(AttachmentRefused, match="at most 1 images"):
        store.for_turn(ids)


def _s3_object(backend: BackendHarness, uri: str) -> bytes:
    from turnkeep.plumbing.clients import shared_client

    region = parse_qs(urlsplit(backend.url).query)["region"][0]
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bytes(shared_client("s3", region).get_object(Bucket=bucket, Key=key)["Body"].read())


def test_a_ready_attachment_is_located_as_its_s3_object_only_where_the_store_is_s3(
    backend: BackendHarness,
) -> None:
    png = files.image("PNG", (20, 10))
    store = AttachmentStore(backend.open("s1"))
    record = _declare(store, png)
    store.receive(record.id, png)
    [part] = store.for_turn([record.id])
    region = parse_qs(urlsplit(backend.url).query).get("region", ["us-east-1"])[0]

    located = store.locate(part, region, "123456789012")

    if backend.name != "aws":
        # The local backends keep the bytes in their own files: the model is sent those.
        assert located is None
        return
    assert located is not None
    assert located.s3_uri.endswith(f"/sessions/s1/attachments/{record.id}")
    assert (located.bucket_owner, located.width, located.height) == ("123456789012", 20, 10)
    assert located.data == b""
    assert _s3_object(backend, located.s3_uri) == png
    assert store.locate(part, "eu-west-1") is None  # another region than the bucket's


def test_a_deleted_attachment_is_not_located(backend: BackendHarness) -> None:
    png = files.image("PNG", (20, 10))
    store = AttachmentStore(backend.open("s1"))
    record = _declare(store, png)
    store.receive(record.id, png)
    [part] = store.for_turn([record.id])
    store.delete(record.id)
    region = parse_qs(urlsplit(backend.url).query).get("region", ["us-east-1"])[0]

    if backend.name == "aws":
        with pytest.raises(AttachmentNotReady):
            store.locate(part, region)
    else:
        assert store.locate(part, region) is None
