"""AWS retirement cleanup deferred by an S3 error while the same scope id starts a new lifetime
before the next open, alone and with two repositories (two processes' clients) racing it.

The new lifetime's first object is named by the sequence right after the retirement boundary,
so a cleanup that deletes one sequence too many deletes live data — and the check below sees it
(`test_the_check_catches_a_cleanup_that_deletes_one_sequence_too_many` proves the check can
fail by shifting the boundary by one).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.reliability.conftest import FULL
from tests.support.aws_template import create_bucket, create_table
from turnkeep.storage import (
    append_list,
    ephemeral_scope,
    retire_scope,
    set_value,
    value,
    value_list,
)
from turnkeep.storage.aws import AwsRepository
from turnkeep.storage.aws.keys import HEAD_SK, ObjectKeys, seq_from_key, session_pk

TABLE, BUCKET, PREFIX = "cleanup", "cleanup-bucket", "cl"
OP = ephemeral_scope("op-reused")
FRAMES = value_list("frames", "r0", OP)
RACES = 20 if FULL else 5


@dataclass
class Aws:
    """moto clients; `repository()` builds one with its own clients (another process)."""

    session: Any

    def client(self, service: str) -> Any:
        return self.session.client(service)

    def repository(self, s3: Any = None) -> AwsRepository:
        return AwsRepository(
            TABLE,
            BUCKET,
            PREFIX,
            dynamodb_client=self.client("dynamodb"),
            s3_client=s3 if s3 is not None else self.client("s3"),
        )

    def object_seqs(self, sid: str) -> list[int]:
        prefix = ObjectKeys(PREFIX).scope_prefix(sid, OP.id)
        listed = self.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        return sorted(seq_from_key(o["Key"]) for o in listed.get("Contents", []))

    def pending(self, sid: str) -> list[str]:
        item = self.client("dynamodb").get_item(
            TableName=TABLE, Key={"pk": {"S": session_pk(sid)}, "sk": {"S": HEAD_SK}}
        )["Item"]
        return sorted(item.get("pending", {}).get("SS", []))


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1")
        create_table(session.client("dynamodb"), TABLE)
        create_bucket(session.client("s3"), BUCKET)
        yield Aws(session)


def _refused(**_: Any) -> None:
    raise ClientError({"Error": {"Code": "SlowDown", "Message": "injected"}}, "DeleteObjects")


def deferred_cleanup_then_new_lifetime(aws: Aws, s3: Any) -> tuple[str, int, int]:
    """Old lifetime, a retirement whose S3 cleanup fails, then the new lifetime's first write
    in the same process before any other open. Returns (session, boundary, new object seq)."""
    sid = f"s-{uuid.uuid4().hex[:10]}"
    st = aws.repository(s3).open(sid)
    for i in range(3):
        st.commit([append_list(FRAMES, f"old-{i}")])
    s3.meta.events.register("before-call.s3.DeleteObjects", _refused)
    try:
        boundary = st.commit([retire_scope(OP)]).seqs[0]
    finally:
        s3.meta.events.unregister("before-call.s3.DeleteObjects", _refused)
    fresh = st.commit([append_list(FRAMES, "new-0")]).seqs[0]
    st.close()
    return sid, boundary, fresh


def lifetime_problems(aws: Aws, sid: str, boundary: int, live: list[int]) -> list[str]:
    """What is wrong after the next open's first head read (which retries pending cleanups):
    retired objects left or live objects deleted."""
    problems = []
    with aws.repository().open(sid) as reader:
        reader.get_stats()
        seqs = aws.object_seqs(sid)
        if any(s <= boundary for s in seqs):
            problems.append(f"retired objects left: {[s for s in seqs if s <= boundary]}")
        missing = sorted(set(live) - set(seqs))
        if missing:
            problems.append(f"live objects of the new lifetime deleted: {missing}")
        elements = [e.seq for e in reader.read_list(FRAMES)]
        if elements != sorted(live):
            problems.append(f"the new lifetime reads {elements}, expected {sorted(live)}")
        reader.commit([set_value(value("probe"), 1)])
    if aws.pending(sid):
        problems.append(f"cleanup markers left: {aws.pending(sid)}")
    return problems


def test_a_deferred_cleanup_spares_the_new_lifetime_that_starts_right_after_the_boundary(
    aws: Aws,
) -> None:
    sid, boundary, fresh = deferred_cleanup_then_new_lifetime(aws, aws.client("s3"))

    assert fresh == boundary + 1  # the tightest case: one sequence past the boundary
    assert aws.object_seqs(sid)[:3] == [1, 2, 3]  # the failed cleanup left the old lifetime
    assert lifetime_problems(aws, sid, boundary, [fresh]) == []


def test_the_check_catches_a_cleanup_that_deletes_one_sequence_too_many(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    from turnkeep.storage.aws import cleanup

    real = cleanup._object_seq
    # An off-by-one boundary (`seq <= boundary + 1`), as a mutation of the cleanup.
    monkeypatch.setattr(
        cleanup, "_object_seq", lambda key: None if real(key) is None else real(key) - 1
    )  # type: ignore[operator]
    sid, boundary, fresh = deferred_cleanup_then_new_lifetime(aws, aws.client("s3"))

    problems = lifetime_problems(aws, sid, boundary, [fresh])

    assert any("live objects of the new lifetime deleted" in p for p in problems)


def race_once(aws: Aws) -> list[str]:
    """Two other processes open the session (each retries the deferred cleanup) while the
    writer keeps appending to the new lifetime; the problems found afterwards."""
    writer_s3 = aws.client("s3")
    sid, boundary, fresh = deferred_cleanup_then_new_lifetime(aws, writer_s3)
    writer = aws.repository(writer_s3)
    live = [fresh]
    lock = threading.Lock()
    barrier = threading.Barrier(3)
    errors: list[str] = []

    def open_and_clean() -> None:
        try:
            repository = aws.repository()  # another process's clients
            barrier.wait()
            with repository.open(sid) as st:  # the open retries the pending cleanup
                st.read_list(FRAMES)
        except BaseException as exc:
            errors.append(repr(exc))

    def keep_writing() -> None:
        try:
            with writer.open(sid) as st:
                barrier.wait()
                for i in range(3):
                    seq = st.commit([append_list(FRAMES, f"new-{i + 1}")]).seqs[0]
                    with lock:
                        live.append(seq)
        except BaseException as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=f) for f in (open_and_clean, open_and_clean, keep_writing)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return errors + lifetime_problems(aws, sid, boundary, live)


def test_two_repositories_racing_a_deferred_cleanup_delete_only_the_old_lifetime(
    aws: Aws,
) -> None:
    failures = [problems for problems in (race_once(aws) for _ in range(RACES)) if problems]

    assert failures == []
