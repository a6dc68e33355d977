"""The head's record of written scopes (docs/aws-storage.md, "Reads and caching"): a scope the
head proves unwritten is read without listing S3 and retired without a cleanup; a head that
cannot prove it (from before the record, or moved by a writer that does not keep it) falls
back to listing and cleaning, so nothing written is ever missed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.support.aws_template import create_bucket, create_table
from turnkeep.storage import (
    ephemeral_scope,
    retire_scope,
    set_value,
    value,
)
from turnkeep.storage.aws import AwsRepository
from turnkeep.storage.aws.instrument import RequestCounter
from turnkeep.storage.aws.keys import HEAD_SK, ObjectKeys, session_pk

REGION = "us-east-1"
OP = ephemeral_scope("op/1")
PROGRESS = value("p", "k", OP)


@dataclass
class Env:
    ddb: Any
    s3: Any
    table: str
    bucket: str
    counter: RequestCounter

    def repo(self) -> AwsRepository:
        """A fresh repository: a cold process with no cached head or scope."""
        return AwsRepository(
            self.table, self.bucket, "t", dynamodb_client=self.ddb, s3_client=self.s3
        )

    def head(self, session_id: str) -> dict[str, Any]:
        found = self.ddb.get_item(
            TableName=self.table,
            Key={"pk": {"S": session_pk(session_id)}, "sk": {"S": HEAD_SK}},
            ConsistentRead=True,
        )
        return dict(found["Item"])

    def update_head(self, session_id: str, expression: str, **values: Any) -> None:
        """Change the head item behind the backend's back (an older release's writer)."""
        self.ddb.update_item(
            TableName=self.table,
            Key={"pk": {"S": session_pk(session_id)}, "sk": {"S": HEAD_SK}},
            UpdateExpression=expression,
            **({"ExpressionAttributeValues": values} if values else {}),
        )

    def object_keys(self, session_id: str) -> list[str]:
        prefix = ObjectKeys("t").scope_prefix(session_id, OP.id)
        found = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for o in found.get("Contents", [])]

    def read_progress(self, session_id: str) -> Any:
        """What a cold step sees: head and boundary read ahead in one request, then the read."""
        with self.repo().open(session_id) as st:
            st.prefetch(scopes=[OP], head=True)
            stored = st.get_value(PROGRESS)
            return None if stored is None else stored.value


@pytest.fixture(scope="module")
def aws() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        create_table(ddb, "marks")
        create_bucket(s3, "marks-bucket")
        yield ddb, s3


@pytest.fixture
def env(aws: tuple[Any, Any]) -> Iterator[Env]:
    ddb, s3 = aws
    counter = RequestCounter().attach(ddb, s3)
    yield Env(ddb, s3, "marks", "marks-bucket", counter)
    counter.detach(ddb, s3)


@pytest.fixture
def sid() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def test_a_scope_never_written_is_read_empty_from_the_head_without_listing(
    env: Env, sid: str
) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(value("session"), 1)])
    env.counter.reset()

    assert env.read_progress(sid) is None

    assert dict(env.counter.calls) == {"BatchGetItem": 1}


def test_a_written_scope_is_listed_and_read_after_the_same_prefetch(env: Env, sid: str) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(PROGRESS, "streamed")])
    env.counter.reset()

    assert env.read_progress(sid) == "streamed"

    assert env.counter.calls["ListObjectsV2"] == 1
    assert env.head(sid)["scopes"] == {"SS": [OP.id]}


def test_retiring_a_scope_never_written_is_one_transaction_with_no_cleanup(
    env: Env, sid: str
) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(value("session"), 1)])
    with env.repo().open(sid) as st:
        env.counter.reset()
        st.commit([retire_scope(OP)])

        assert dict(env.counter.calls) == {"GetItem": 1, "TransactWriteItems": 1}
    assert "pending" not in env.head(sid)


def test_a_scope_written_after_its_retirement_is_listed_again_and_cleaned_again(
    env: Env, sid: str
) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(PROGRESS, "first")])
        st.commit([retire_scope(OP)])
    assert "scopes" not in env.head(sid)  # the retirement took the mark away with the objects
    assert env.object_keys(sid) == []
    assert env.read_progress(sid) is None

    with env.repo().open(sid) as st:
        st.commit([set_value(PROGRESS, "second")])
    assert env.read_progress(sid) == "second"

    with env.repo().open(sid) as st:
        env.counter.reset()
        st.commit([retire_scope(OP)])
        assert env.counter.calls["ListObjectsV2"] == 1
        assert env.counter.calls["DeleteObjects"] == 1
    assert env.object_keys(sid) == []


def test_a_head_from_before_the_scope_record_keeps_listing_and_cleaning(env: Env, sid: str) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(PROGRESS, "old release")])
    env.update_head(sid, "REMOVE scopes, scopes_seq")  # as a previous release left it

    assert env.read_progress(sid) == "old release"

    with env.repo().open(sid) as st:
        st.commit([retire_scope(OP)])
    assert env.object_keys(sid) == []
    assert env.read_progress(sid) is None


def test_a_head_from_before_the_scope_record_never_proves_a_scope_unwritten(
    env: Env, sid: str
) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(value("session"), 1)])
    env.update_head(sid, "REMOVE scopes_seq")
    env.counter.reset()

    assert env.read_progress(sid) is None

    assert env.counter.calls["ListObjectsV2"] == 1


def test_a_write_by_a_writer_that_does_not_keep_the_record_is_still_found(
    env: Env, sid: str
) -> None:
    # A Lambda of the previous release, mid-deploy, writes progress on a head this release
    # created: its allocation moves last_seq but neither marks the scope nor scopes_seq.
    with env.repo().open(sid) as st:
        st.commit([set_value(value("session"), 1)])
        st.commit([set_value(PROGRESS, "from an older writer")])
    env.update_head(
        sid,
        "DELETE scopes :op ADD scopes_seq :back",
        **{
            ":op": {"SS": [OP.id]},
            ":back": {"N": "-1"},
        },
    )

    assert env.read_progress(sid) == "from an older writer"

    with env.repo().open(sid) as st:
        st.commit([retire_scope(OP)])
    assert env.object_keys(sid) == []


def test_a_write_after_the_prefetch_by_another_handle_of_the_process_is_seen(
    env: Env, sid: str
) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(value("session"), 1)])
    repo = env.repo()
    with repo.open(sid) as reader:
        reader.prefetch(scopes=[OP], head=True)
        with repo.open(sid) as writer:
            writer.commit([set_value(PROGRESS, "meanwhile")])

        stored = reader.get_value(PROGRESS)

    assert stored is not None
    assert stored.value == "meanwhile"


def test_a_write_after_the_prefetch_by_the_same_handle_is_seen(env: Env, sid: str) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(value("session"), 1)])
    with env.repo().open(sid) as st:
        st.prefetch(scopes=[OP], head=True)
        st.commit([set_value(PROGRESS, "mine")])

        stored = st.get_value(PROGRESS)

    assert stored is not None
    assert stored.value == "mine"
