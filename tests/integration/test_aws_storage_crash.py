"""Crash injection: the process dies after each AWS call of a commit or a retirement.

A botocore after-call hook raises once the Nth call has taken effect; the session is then
reopened through a different repository with clean clients and the invariants are checked:
no sequence reuse, all-or-nothing commits, retired data invisible, cleanup completes, and
committed data intact.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.support.aws_template import create_bucket, create_table
from turnkeep.storage import (
    Storage,
    append_list,
    ephemeral_scope,
    insert_entry,
    retire_scope,
    set_value,
    value,
    value_list,
)
from turnkeep.storage.aws import AwsRepository
from turnkeep.storage.aws.keys import HEAD_SK, ObjectKeys, seq_from_key, session_pk

REGION = "us-east-1"
TABLE, BUCKET, PREFIX = "crash", "crash-bucket", "c"
OP = ephemeral_scope("op-1")
OTHER = ephemeral_scope("op-2")


class Crash(Exception):
    """The injected process death."""


class CrashAfter:
    """Raise Crash right after the Nth API call (it took effect) once armed."""

    def __init__(self, *clients: Any) -> None:
        self.limit: int | None = None
        self.calls: list[str] = []
        for client in clients:
            client.meta.events.register("after-call.*.*", self._after)

    def arm(self, limit: int | None) -> None:
        self.limit = limit
        self.calls = []

    def _after(self, model: Any, **_: Any) -> None:
        if self.limit is None:
            return
        self.calls.append(model.name)
        if len(self.calls) == self.limit:
            self.limit = None
            raise Crash(f"crashed after call #{len(self.calls)} ({model.name})")


@dataclass
class Env:
    ddb: Any
    s3: Any
    crash_ddb: Any
    crash_s3: Any
    crash: CrashAfter

    def clean_repo(self) -> AwsRepository:
        return AwsRepository(TABLE, BUCKET, PREFIX, dynamodb_client=self.ddb, s3_client=self.s3)

    def crashing_repo(self) -> AwsRepository:
        return AwsRepository(
            TABLE, BUCKET, PREFIX, dynamodb_client=self.crash_ddb, s3_client=self.crash_s3
        )

    def head_last_seq(self, sid: str) -> int:
        item = self.ddb.get_item(
            TableName=TABLE,
            Key={"pk": {"S": session_pk(sid)}, "sk": {"S": HEAD_SK}},
            ConsistentRead=True,
        ).get("Item")
        return int(item["last_seq"]["N"]) if item else 0

    def object_seqs(self, sid: str, scope_id: str) -> list[int]:
        prefix = ObjectKeys(PREFIX).scope_prefix(sid, scope_id)
        found = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
        return [seq_from_key(o["Key"]) for o in found]


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        create_table(ddb, TABLE)
        create_bucket(s3, BUCKET)
        crash_ddb = boto3.client("dynamodb", region_name=REGION)
        crash_s3 = boto3.client("s3", region_name=REGION)
        yield Env(ddb, s3, crash_ddb, crash_s3, CrashAfter(crash_ddb, crash_s3))


Setup = Callable[[Storage], None]
Operation = Callable[[Storage], object]


def _calls_of(env: Env, setup: Setup, operation: Operation) -> list[str]:
    """The AWS calls `operation` makes (measured on a scratch session)."""
    sid = f"probe-{uuid.uuid4().hex[:8]}"
    with env.crashing_repo().open(sid) as st:
        setup(st)
        env.crash.arm(10_000)
        operation(st)
        calls = env.crash.calls
        env.crash.arm(None)
    return calls


def _crash_each_call(
    env: Env, setup: Setup, operation: Operation, expected_calls: list[str]
) -> Iterator[tuple[str, int, str]]:
    """For every call of `operation`: run it in a fresh session and crash right after it."""
    calls = _calls_of(env, setup, operation)
    assert calls == expected_calls
    for number, name in enumerate(calls, start=1):
        sid = f"crash-{uuid.uuid4().hex[:8]}"
        st = env.crashing_repo().open(sid)
        setup(st)
        env.crash.arm(number)
        with pytest.raises(Crash):
            operation(st)
        env.crash.arm(None)
        yield sid, number, name


def _setup_session(st: Storage) -> None:
    st.commit([set_value(value("kept"), "before"), insert_entry("root", None, "message")])
    st.commit([set_value(value("p", "k", OP), "progress")])


def test_a_crash_after_any_call_of_a_session_commit_keeps_it_atomic_and_sequences_unique(
    env: Env,
) -> None:
    def operation(st: Storage) -> object:
        # A rival moved the head, so this commit also exercises the conflict path.
        rival = env.clean_repo().open(st.session_id)
        rival.commit([set_value(value("rival"), 1)])
        rival.close()
        return st.commit(
            [set_value(value("kept"), "after"), insert_entry("child", "root", "message")]
        )

    for sid, number, name in _crash_each_call(
        env,
        _setup_session,
        operation,
        ["TransactWriteItems", "TransactWriteItems"],
    ):
        committed_head = env.head_last_seq(sid)
        with env.clean_repo().open(sid) as st:
            kept = st.get_value(value("kept"))
            child = st.get_entries(["child"])
            assert kept is not None, (number, name)
            landed = number == 2
            assert (kept.value == "after") == landed, (number, name)
            assert bool(child) == landed, (number, name)
            progress = st.get_value(value("p", "k", OP))
            assert progress is not None
            assert progress.value == "progress"
            assert st.get_entries(["root"])
            after = st.commit([set_value(value("next"), 1)])
            assert after.first_seq == committed_head + 1, (number, name)
            if landed:
                assert child[0].seq < after.first_seq


@pytest.mark.parametrize(
    ("guarded", "calls"),
    [(False, ["UpdateItem", "PutObject"]), (True, ["TransactWriteItems", "PutObject"])],
    ids=["plain", "guarded"],
)
def test_a_crash_after_any_call_of_a_scoped_commit_leaves_a_gap_or_the_whole_object(
    env: Env, guarded: bool, calls: list[str]
) -> None:
    def operation(st: Storage) -> object:
        return st.commit(
            [set_value(value("p", "k", OP), "new"), append_list(value_list("f", "", OP), 1)],
            guard=value("kept") if guarded else None,
        )

    for sid, number, name in _crash_each_call(env, _setup_session, operation, calls):
        allocated = env.head_last_seq(sid)
        with env.clean_repo().open(sid) as st:
            progress = st.get_value(value("p", "k", OP))
            frames = st.read_list(value_list("f", "", OP))
            landed = name == "PutObject"
            assert progress is not None
            assert (progress.value == "new") == landed, (number, name)
            assert len(frames) == (1 if landed else 0), (number, name)
            kept = st.get_value(value("kept"))
            assert kept is not None
            assert kept.value == "before"
            after = st.commit([set_value(value("p", "k", OP), "later")])
            assert after.first_seq == allocated + 1, (number, name)  # the gap is never reused


def _setup_retirement(st: Storage) -> None:
    _setup_session(st)
    st.commit([append_list(value_list("f", "", OP), i) for i in range(3)])
    st.commit([set_value(value("p", "k", OTHER), "other")])


def _check_after_retirement(env: Env, sid: str, label: tuple[int, str]) -> None:
    with env.clean_repo().open(sid) as st:
        st.get_stats()  # the first read of the head finishes a pending cleanup
        done = st.get_value(value("done"))  # the retirement's sibling landed with it
        assert done is not None, label
        assert done.value is True, label
        assert st.get_value(value("p", "k", OP)) is None, label
        assert st.read_list(value_list("f", "", OP)) == [], label
        assert env.object_seqs(sid, OP.id) == [], label  # the reopen finished the cleanup
        other = st.get_value(value("p", "k", OTHER))
        assert other is not None, label
        assert other.value == "other", label
        kept = st.get_value(value("kept"))
        assert kept is not None, label
        assert kept.value == "before", label
        reborn = st.commit([set_value(value("p", "k", OP), "reborn")])
    with env.clean_repo().open(sid) as st:
        again = st.get_value(value("p", "k", OP))
        assert again is not None
        assert (again.value, again.seq) == ("reborn", reborn.first_seq)
    assert env.object_seqs(sid, OP.id) == [reborn.first_seq], label


def test_a_crash_after_any_call_of_a_retirement_never_revives_retired_data(env: Env) -> None:
    def operation(st: Storage) -> object:
        return st.commit([retire_scope(OP), set_value(value("done"), True)])

    for sid, number, name in _crash_each_call(
        env,
        _setup_retirement,
        operation,
        ["TransactWriteItems", "ListObjectsV2", "DeleteObjects", "UpdateItem"],
    ):
        _check_after_retirement(env, sid, (number, name))


def _refuse_delete(**_: Any) -> None:
    raise Crash("S3 delete refused")


def _retire_with_failed_cleanup(env: Env, st: Storage) -> None:
    """Retire OP while S3 deletion dies, so the cleanup stays pending in the head."""
    env.s3.meta.events.register("before-call.s3.DeleteObjects", _refuse_delete)
    try:
        with pytest.raises(Crash):
            st.commit([retire_scope(OP)])
    finally:
        env.s3.meta.events.unregister("before-call.s3.DeleteObjects", _refuse_delete)


def _open_and_read_head(env: Env, sid: str) -> None:
    env.crashing_repo().open(sid).get_stats()


def test_a_crash_during_the_cleanup_a_head_read_retries_is_finished_by_the_following_one(
    env: Env,
) -> None:
    probe = _calls_of(env, _setup_retirement, lambda st: _open_and_read_head(env, st.session_id))
    assert probe == ["GetItem"]  # nothing pending: the head read is the only request
    sid = f"crash-{uuid.uuid4().hex[:8]}"
    steps = ["GetItem", "ListObjectsV2", "DeleteObjects", "UpdateItem"]
    for number, name in enumerate(steps, start=1):
        with env.clean_repo().open(sid) as st:
            if number == 1:
                _setup_retirement(st)
            else:
                st.commit([set_value(value("p", "k", OP), "again")])  # a new lifetime
            _retire_with_failed_cleanup(env, st)
        assert env.object_seqs(sid, OP.id), "the failed cleanup left retired objects"
        env.crash.arm(number)
        with pytest.raises(Crash, match=name):
            _open_and_read_head(env, sid)
        env.crash.arm(None)
        with env.clean_repo().open(sid) as reopened:
            reopened.get_stats()
            assert env.object_seqs(sid, OP.id) == [], (number, name)
            assert reopened.get_value(value("p", "k", OP)) is None, (number, name)


def test_a_crash_between_the_pages_of_a_multi_page_retirement_never_revives_retired_data(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two keys a page stand in for 1000, so five objects need three list + delete rounds and
    # the crash also lands between rounds (part of the scope deleted, part still present).
    monkeypatch.setattr("turnkeep.storage.aws.cleanup.DELETE_BATCH", 2)

    def setup(st: Storage) -> None:
        _setup_retirement(st)
        for i in range(3):
            st.commit([append_list(value_list("f", "", OP), f"more-{i}")])

    def operation(st: Storage) -> object:
        return st.commit([retire_scope(OP), set_value(value("done"), True)])

    rounds = ["ListObjectsV2", "DeleteObjects"] * 3
    for sid, number, name in _crash_each_call(
        env, setup, operation, ["TransactWriteItems", *rounds, "UpdateItem"]
    ):
        _check_after_retirement(env, sid, (number, name))
