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


def _expired_with_unchecked_bytes(
    backend: BackendHarness, clock: Clock
) -> tuple[AttachmentStore, str]:
    """A session whose one attachment is pending with its bytes stored but never checked (as
    after a direct S3 upload nobody read), and now past its expiry."""
    store = AttachmentStore(backend.open("s1"), clock=clock)
    png = files.image()
    record = _declare(store, png)
    store.storage.blobs().put(record.id, png)
    clock.now += store.limits.pending_seconds * 1000
    return store, record.id


def test_an_expired_pending_attachment_and_its_bytes_are_swept(backend: BackendHarness) -> None:
    clock = Clock()
    store, expired = _expired_with_unchecked_bytes(backend, clock)

    assert store.sweep() == [expired]

    again = AttachmentStore(backend.reopen(store.storage), clock=clock)
    assert again.get(expired) is None
    assert again.records(include_deleted=True) == []
    assert again.storage.blobs().names() == []
    assert again.sweep() == []


def test_a_pending_attachment_within_its_time_and_ready_ones_are_not_swept(
    backend: BackendHarness,
) -> None:
    clock = Clock()
    store = AttachmentStore(backend.open("s1"), clock=clock)
    png = files.image()
    ready = store.receive(_declare(store, png).id, png)
    clock.now += store.limits.pending_seconds * 1000 - 1
    pending = _declare(store, files.image(color="blue"))
    store.storage.blobs().put(pending.id, b"unchecked")
    clock.now += 1  # the first one's pending time is over, the second one's is not

    assert store.sweep() == []
    assert [r.id for r in store.records()] == [ready.id, pending.id]
    assert store.storage.blobs().names() == sorted([ready.id, pending.id])


def test_declaring_an_attachment_sweeps_the_expired_ones_first(backend: BackendHarness) -> None:
    clock = Clock()
    store, _expired = _expired_with_unchecked_bytes(backend, clock)

    fresh = _declare(store, files.image(color="blue"))

    assert [r.id for r in store.records(include_deleted=True)] == [fresh.id]
    assert store.storage.blobs().names() == []


def test_a_turn_naming_attachments_sweeps_the_expired_ones(backend: BackendHarness) -> None:
    clock = Clock()
    store, expired = _expired_with_unchecked_bytes(backend, clock)
    png = files.image(color="green")
    clock.now -= store.limits.pending_seconds * 1000
    ready = store.receive(_declare(store, png).id, png)
    clock.now += store.limits.pending_seconds * 1000

    [part] = store.for_turn([ready.id])

    assert part.attachment_id == ready.id
    assert store.get(expired) is None
    assert store.storage.blobs().names() == [ready.id]


def test_an_expired_attachment_no_longer_counts_against_the_cap_once_swept(
    backend: BackendHarness,
) -> None:
    clock = Clock()
    png = files.image()
    store = AttachmentStore(
        backend.open("s1"), limits=AttachmentLimits(session_bytes=len(png)), clock=clock
    )
    _declare(store, png)
    clock.now += store.limits.pending_seconds * 1000

    again = _declare(store, png)

    assert [r.id for r in store.records()] == [again.id]


def test_keeping_under_a_derived_id_twice_stores_one_attachment(backend: BackendHarness) -> None:
    from turnkeep.attachments.records import derived_attachment_id

    png = files.image()
    store = AttachmentStore(backend.open("s1"), limits=AttachmentLimits(session_bytes=len(png)))
    attachment_id = derived_attachment_id("tool-image", "s1/op/call/0")

    first = store.keep(attachment_id, name="chart.png", media_type="image/png", data=png)
    second = store.keep(attachment_id, name="chart.png", media_type="image/png", data=png)

    assert first == second
    assert first.status == "ready"
    assert [r.id for r in store.records()] == [attachment_id]
    assert store.storage.blobs().names() == [attachment_id]


def test_keeping_other_bytes_under_a_derived_id_replaces_the_earlier_ones(
    backend: BackendHarness,
) -> None:
    from turnkeep.attachments.records import derived_attachment_id

    red, blue = files.image(color="red"), files.image(color="blue")
    # The cap holds one image: the earlier bytes of the id must not count against the new ones.
    cap = max(len(red), len(blue))
    store = AttachmentStore(backend.open("s1"), limits=AttachmentLimits(session_bytes=cap))
    attachment_id = derived_attachment_id("tool-image", "s1/op/call/0")
    store.keep(attachment_id, name="chart.png", media_type="image/png", data=red)

    replaced = store.keep(attachment_id, name="chart.png", media_type="image/png", data=blue)

    assert replaced.sha256 == files.sha256(blue)
    assert [r.id for r in store.records()] == [attachment_id]
    assert store.storage.blobs().get(attachment_id) == blue
