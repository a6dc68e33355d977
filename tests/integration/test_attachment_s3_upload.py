"""On AWS an attachment's bytes go straight to S3 with a presigned POST whose policy pins the
key, the exact length and the content type: S3 (here a policy-enforcing stand-in in front of
moto's server) refuses anything else, and the attachment is checked once its bytes are there
(docs/attachments.md, "Upload")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import attachment_files as files
from tests.support.aws_template import create_bucket, create_table
from tests.support.s3_post_policy import REGION, client_of, policy_enforcing_s3
from turnkeep.attachments import AttachmentRecord, AttachmentRefused, AttachmentStore
from turnkeep.storage.aws import AwsRepository


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str, list[str]]]:
    with policy_enforcing_s3() as endpoints:
        yield endpoints


@pytest.fixture
def aws(servers: tuple[str, str, list[str]]) -> tuple[AwsRepository, list[str], Any]:
    """A fresh table and bucket (moto's state is process-wide) behind the stand-in."""
    s3_endpoint, moto_endpoint, refusals = servers
    refusals.clear()
    name = f"attach-{uuid.uuid4().hex[:12]}"
    dynamodb = client_of("dynamodb", moto_endpoint)
    s3 = client_of("s3", s3_endpoint)
    create_table(dynamodb, name)
    create_bucket(s3, name)
    return AwsRepository(name, name, dynamodb_client=dynamodb, s3_client=s3), refusals, s3


def _post(
    store: AttachmentStore, record: AttachmentRecord, data: bytes, **over: str
) -> httpx.Response:
    form = store.upload_form(record)
    assert form is not None
    fields = {**form.fields, **over}
    return httpx.post(form.url, data=fields, files={"file": ("x", data)}, timeout=30)


def test_the_presigned_post_stores_the_exact_bytes_and_the_attachment_becomes_ready(
    aws: tuple[AwsRepository, list[str], Any],
) -> None:
    repo, refusals, s3 = aws
    png = files.image("PNG", (10, 10))
    with repo.open("s1") as storage:
        store = AttachmentStore(storage)
        record = store.create(
            name="shot.png", media_type="image/png", size=len(png), sha256=files.sha256(png)
        )
        form = store.upload_form(record)
        assert form is not None
        assert form.fields["key"] == f"turnkeep/sessions/s1/attachments/{record.id}"
        posted = _post(store, record, png)
        assert posted.status_code == 204, posted.text
        assert refusals == []
        ready = store.finish(record.id)
        assert (ready.status, ready.width) == ("ready", 10)
    stored = s3.get_object(Bucket=repo.bucket, Key=f"turnkeep/sessions/s1/attachments/{record.id}")
    assert stored["Body"].read() == png


def test_s3_refuses_a_different_size_a_different_type_or_another_key(
    aws: tuple[AwsRepository, list[str], Any],
) -> None:
    repo, refusals, s3 = aws
    png = files.image()
    with repo.open("s1") as storage:
        store = AttachmentStore(storage)
        record = store.create(
            name="a.png", media_type="image/png", size=len(png), sha256=files.sha256(png)
        )
        bigger = _post(store, record, png + b"\x00")
        smaller = _post(store, record, png[:-1])
        gif = _post(store, record, png, **{"Content-Type": "image/gif"})
        elsewhere = _post(store, record, png, key="turnkeep/sessions/s2/attachments/" + record.id)
        assert [
            bigger.status_code,
            smaller.status_code,
            gif.status_code,
            elsewhere.status_code,
        ] == [400, 400, 403, 403]
        assert refusals == ["EntityTooLarge", "EntityTooSmall", "AccessDenied", "AccessDenied"]
        assert store.finish(record.id).status == "pending"
    listed = s3.list_objects_v2(Bucket=repo.bucket)
    assert listed.get("KeyCount", 0) == 0


def test_bytes_uploaded_to_s3_that_fail_the_checks_are_refused_and_deleted(
    aws: tuple[AwsRepository, list[str], Any],
) -> None:
    repo, _refusals, s3 = aws
    pdf = files.pdf()
    with repo.open("s1") as storage:
        store = AttachmentStore(storage)
        record = store.create(
            name="shot.png", media_type="image/png", size=len(pdf), sha256=files.sha256(pdf)
        )
        assert _post(store, record, pdf, **{"Content-Type": "image/png"}).status_code == 204
        with pytest.raises(AttachmentRefused, match="bytes are a PDF"):
            store.finish(record.id)
        refused = store.get(record.id)
        assert refused is not None
        assert refused.status == "refused"
    assert s3.list_objects_v2(Bucket=repo.bucket).get("KeyCount", 0) == 0


def test_deleting_the_session_leaves_no_attachment_object(
    aws: tuple[AwsRepository, list[str], Any],
) -> None:
    repo, _refusals, s3 = aws
    png = files.image()
    with repo.open("s1") as storage:
        store = AttachmentStore(storage)
        record = store.create(
            name="a.png", media_type="image/png", size=len(png), sha256=files.sha256(png)
        )
        store.receive(record.id, png)
    assert s3.list_objects_v2(Bucket=repo.bucket).get("KeyCount", 0) == 1
    repo.delete_session("s1")
    assert s3.list_objects_v2(Bucket=repo.bucket).get("KeyCount", 0) == 0


def test_chat_url_attaches_through_the_api_and_s3s_presigned_post_to_a_turn(
    servers: tuple[str, str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole AWS flow: `chat --url`'s uploader against the API on aws:// storage (the
    stand-in in front of moto for S3 and DynamoDB), the bytes POSTed straight to "S3", checked
    on the next read, then sent with a turn the scripted model describes."""
    from tests.support.api_client import auth, make_api_harness
    from turnkeep.cli.attach import attach_remote
    from turnkeep.cli.remote import RemoteChat
    from turnkeep.plumbing import clients
    from turnkeep.runtime.settings import TurnkeepSettings

    s3_endpoint, _moto, refusals = servers
    refusals.clear()
    # The process's one botocore session keeps the credentials it resolved first; an earlier
    # test in this worker may have resolved moto's, which sign a POST S3 (here, the stand-in)
    # refuses with SignatureDoesNotMatch. A fresh session resolves the ones set below.
    monkeypatch.setattr(clients, "_SESSION", None)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    name = f"attach-{uuid.uuid4().hex[:12]}"
    create_table(client_of("dynamodb", s3_endpoint), name)
    create_bucket(client_of("s3", s3_endpoint), name)
    url = f"aws://?table={name}&bucket={name}&region={REGION}&endpoint={s3_endpoint}"
    png = files.image("PNG", (8, 8))
    (tmp_path / "shot.png").write_bytes(png)

    def settings(memory: str) -> TurnkeepSettings:
        return TurnkeepSettings(
            storage_url=url, envelope_url=f"memory://{memory}", frame_interval_ms=0
        )

    harness = make_api_harness(turnkeep=settings)
    api = next(harness)
    try:
        api.client.headers.update(auth())
        chat = RemoteChat(api.client, output=None)  # type: ignore[arg-type]  # no turn printed
        chat.open_session(None)
        ref = attach_remote(chat, str(tmp_path / "shot.png"))
        assert refusals == []
        sid = chat.session_id
        started = api.client.post(
            f"/sessions/{sid}/turns", json={"text": "look", "attachments": [ref.attachment_id]}
        )
        assert started.status_code == 202, started.text
        reply = repr(api.client.get(f"/sessions/{sid}/transcript").json())
        assert (
            f"Attached: shot.png (image/png, {len(png)} bytes, sha256 {files.sha256(png)[:12]})"
            in reply
        )
        listed = client_of("s3", s3_endpoint).list_objects_v2(Bucket=name)
        assert [o["Key"] for o in listed["Contents"]] == [
            f"turnkeep/sessions/{sid}/attachments/{ref.attachment_id}"
        ]
    finally:
        harness.close()


def _tags(s3: Any, bucket: str, key: str) -> dict[str, str]:
    tagging = s3.get_object_tagging(Bucket=bucket, Key=key)
    return {t["Key"]: t["Value"] for t in tagging["TagSet"]}


def test_an_upload_is_tagged_pending_until_its_check_removes_the_tag(
    aws: tuple[AwsRepository, list[str], Any],
) -> None:
    from turnkeep.storage.aws.blobs import PENDING_TAG

    repo, refusals, s3 = aws
    png = files.image("PNG", (10, 10))
    with repo.open("s1") as storage:
        store = AttachmentStore(storage)
        record = store.create(
            name="shot.png", media_type="image/png", size=len(png), sha256=files.sha256(png)
        )
        key = f"turnkeep/sessions/s1/attachments/{record.id}"
        assert _post(store, record, png).status_code == 204
        uploaded = _tags(s3, repo.bucket, key)
        assert store.finish(record.id).status == "ready"
        checked = _tags(s3, repo.bucket, key)
    assert refusals == []
    assert uploaded == {PENDING_TAG[0]: PENDING_TAG[1]}
    assert checked == {}
    assert s3.get_object(Bucket=repo.bucket, Key=key)["Body"].read() == png


def test_s3_refuses_an_upload_that_drops_or_changes_the_pending_tag(
    aws: tuple[AwsRepository, list[str], Any],
) -> None:
    repo, refusals, s3 = aws
    png = files.image()
    with repo.open("s1") as storage:
        store = AttachmentStore(storage)
        record = store.create(
            name="a.png", media_type="image/png", size=len(png), sha256=files.sha256(png)
        )
        kept = "<Tagging><TagSet><Tag><Key>keep</Key><Value>1</Value></Tag></TagSet></Tagging>"
        changed = _post(store, record, png, tagging=kept)
        dropped = _post(store, record, png, tagging="")
    assert [changed.status_code, dropped.status_code] == [403, 403]
    assert refusals == ["AccessDenied", "AccessDenied"]
    assert s3.list_objects_v2(Bucket=repo.bucket).get("KeyCount", 0) == 0
