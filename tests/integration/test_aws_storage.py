"""Focused behaviour of the aws storage backend on moto: key design, limits, costs, cleanup."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from hypothesis import given, strategies
from moto import mock_aws

from tests.support.aws_template import create_bucket, create_table, table_definition
from turnkeep.storage import (
    SESSION_SCOPE,
    EntryConflictError,
    GuardFailedError,
    StorageConflictError,
    StorageValidationError,
    append_list,
    delete_list,
    delete_value,
    ephemeral_scope,
    insert_entry,
    open_storage,
    retire_scope,
    set_value,
    value,
    value_list,
)
from turnkeep.storage.aws import AwsRepository, repository_from_url
from turnkeep.storage.aws.instrument import RequestCounter
from turnkeep.storage.aws.keys import (
    HEAD_SK,
    ObjectKeys,
    escape,
    session_pk,
    unescape,
    value_sk,
)

REGION = "us-east-1"


@dataclass
class Env:
    ddb: Any
    s3: Any
    table: str
    bucket: str

    def repo(self, prefix: str = "t") -> AwsRepository:
        return AwsRepository(
            self.table, self.bucket, prefix, dynamodb_client=self.ddb, s3_client=self.s3
        )

    def items(self, session_id: str) -> list[dict[str, Any]]:
        found = self.ddb.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": session_pk(session_id)}},
            ConsistentRead=True,
        )
        return list(found["Items"])

    def object_keys(self, prefix: str) -> list[str]:
        found = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for o in found.get("Contents", [])]


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        create_table(ddb, "focused")
        create_bucket(s3, "focused-bucket")
        yield Env(ddb, s3, "focused", "focused-bucket")


@pytest.fixture
def sid() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def counter(env: Env) -> Iterator[RequestCounter]:
    counting = RequestCounter().attach(env.ddb, env.s3)
    yield counting
    counting.detach(env.ddb, env.s3)


OP = ephemeral_scope("op/1 é")


def test_the_table_declared_in_the_template_has_the_key_schema_the_backend_uses() -> None:
    props = table_definition()
    assert {k["AttributeName"]: k["KeyType"] for k in props["KeySchema"]} == {
        "pk": "HASH",
        "sk": "RANGE",
    }
    assert [g["IndexName"] for g in props["GlobalSecondaryIndexes"]] == ["gsi1"]
    assert props["TimeToLiveSpecification"]["AttributeName"] == "expiresAt"


def test_every_storage_item_lives_in_the_session_partition_under_an_s_hash_sort_key(
    env: Env, sid: str
) -> None:
    with env.repo().open(sid) as st:
        st.commit(
            [
                set_value(value("cfg", "a#b%c"), 1),
                append_list(value_list("log"), "x", tag="t"),
                insert_entry("e1", None, "message", {"m": 1}),
                retire_scope(OP),
            ]
        )
    sort_keys = sorted(i["sk"]["S"] for i in env.items(sid))
    assert sort_keys
    assert all(sk.startswith("S#") for sk in sort_keys)
    assert HEAD_SK in sort_keys
    assert "S#V#cfg#a%23b%25c" in sort_keys


def test_a_scoped_commit_is_one_object_under_the_quoted_scope_prefix(env: Env, sid: str) -> None:
    with env.repo("pre").open(sid) as st:
        result = st.commit([set_value(value("p", "k", OP), 1), set_value(value("p", "j", OP), 2)])
    assert env.object_keys(f"pre/sessions/{sid}/") == [
        f"pre/sessions/{sid}/scopes/op%2F1%20%C3%A9/{result.first_seq:020d}.json"
    ]
    assert not [i for i in env.items(sid) if i["sk"]["S"] != HEAD_SK]


def test_writes_to_one_item_fold_into_one_action_but_each_consumes_a_sequence(
    env: Env, sid: str
) -> None:
    with env.repo().open(sid) as st:
        result = st.commit(
            [set_value(value("v"), 1), set_value(value("v"), 2), set_value(value("v"), 3)]
        )
        stored = st.get_value(value("v"))
    assert result.seqs == (1, 2, 3)
    assert stored is not None
    assert (stored.value, stored.seq) == (3, 3)


def test_a_value_too_large_for_an_item_is_rejected_naming_the_limit(env: Env, sid: str) -> None:
    with env.repo().open(sid) as st:
        with pytest.raises(StorageValidationError, match="350000 bytes"):
            st.commit([set_value(value("big"), "x" * 350_001)])
        with pytest.raises(StorageValidationError, match="350000 bytes"):
            st.commit(
                [
                    set_value(value("big", scope=SESSION_SCOPE), "ok"),
                    insert_entry("e", None, "message", "y" * 400_000),
                ]
            )
        assert st.get_value(value("big")) is None
        assert st.commit([set_value(value("big"), "ok")]).seqs == (1,)


def test_a_scoped_value_may_exceed_the_item_limit_because_it_lives_in_s3(
    env: Env, sid: str
) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(value("big", scope=OP), "x" * 500_000)])
    with env.repo().open(sid) as st:
        stored = st.get_value(value("big", scope=OP))
    assert stored is not None
    assert len(str(stored.value)) == 500_000


def test_a_transaction_over_100_actions_is_rejected_naming_the_limit(env: Env, sid: str) -> None:
    with env.repo().open(sid) as st:
        writes = [append_list(value_list("many"), i) for i in range(100)]
        with pytest.raises(StorageValidationError, match="at most 100 actions"):
            st.commit(writes)
        assert st.read_list(value_list("many")) == []
        assert st.commit(writes[:99]).seqs[-1] == 99


def test_a_transaction_over_4_mb_is_rejected_naming_the_limit(env: Env, sid: str) -> None:
    with env.repo().open(sid) as st:
        writes = [set_value(value("v", str(i)), "x" * 340_000) for i in range(12)]
        with pytest.raises(StorageValidationError, match="4 MB"):
            st.commit(writes)
        assert st.scan_values("v") == []


def test_delete_list_hides_earlier_elements_with_one_tombstone(env: Env, sid: str) -> None:
    with env.repo().open(sid) as st:
        st.commit([append_list(value_list("l"), i) for i in range(5)])
        st.commit([delete_list(value_list("l")), append_list(value_list("l"), "new")])
    with env.repo().open(sid) as st:
        assert [e.value for e in st.read_list(value_list("l"))] == ["new"]
        assert [e.value for e in st.read_list(value_list("l"), order="desc")] == ["new"]
        assert [lst for lst, _ in st.snapshot().lists] == [value_list("l")]


def test_open_costs_nothing_and_commits_after_the_first_head_read_cost_one_request_each(
    env: Env, sid: str, counter: RequestCounter
) -> None:
    with env.repo().open(sid) as st:
        assert dict(counter.calls) == {}
        st.commit([set_value(value("a"), 1), insert_entry("e1", None, "message")])
        assert dict(counter.calls) == {"GetItem": 1, "TransactWriteItems": 1}
        counter.reset()
        st.commit([set_value(value("a"), 2), insert_entry("e2", "e1", "message")])
        assert dict(counter.calls) == {"TransactWriteItems": 1}


def test_a_commit_that_lost_the_head_race_takes_the_head_from_the_cancellation_and_lands_once(
    env: Env, sid: str, counter: RequestCounter
) -> None:
    with env.repo().open(sid) as st, env.repo().open(sid) as rival:
        st.get_stats()  # st now holds the head the rival is about to move
        rival.commit([set_value(value("a"), "rival")])
        counter.reset()
        result = st.commit([set_value(value("a"), "mine")])
        assert dict(counter.calls) == {"TransactWriteItems": 2}  # no re-read of the head
        assert result.seqs == (2,)
        stored = st.get_value(value("a"))
        assert stored is not None
        assert (stored.value, stored.seq) == ("mine", 2)


def test_scoped_commit_costs_two_requests_and_rereads_cost_nothing(
    env: Env, sid: str, counter: RequestCounter
) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(value("p", "k", OP), 1)])
        counter.reset()
        st.commit([append_list(value_list("f", "", OP), "frame")])
        assert dict(counter.calls) == {"UpdateItem": 1, "PutObject": 1}
        st.get_value(value("p", "k", OP))  # first read loads the scope
        counter.reset()
        st.commit([append_list(value_list("f", "", OP), "frame2")])
        assert [e.value for e in st.read_list(value_list("f", "", OP))] == ["frame", "frame2"]
        assert st.get_value(value("p", "k", OP)) is not None
        assert dict(counter.calls) == {"UpdateItem": 1, "PutObject": 1}


@pytest.mark.parametrize(("objects", "pages"), [(1, 1), (4, 2), (5, 3)])
def test_retirement_costs_a_commit_a_list_and_a_delete_per_page_and_one_head_update(
    env: Env,
    sid: str,
    counter: RequestCounter,
    *,
    monkeypatch: pytest.MonkeyPatch,
    objects: int,
    pages: int,
) -> None:
    # Pages of 2 stand in for S3's 1000 so the per-page cost shows with a handful of objects.
    monkeypatch.setattr("turnkeep.storage.aws.cleanup.DELETE_BATCH", 2)
    with env.repo().open(sid) as st:
        for i in range(objects):
            st.commit([set_value(value("p", str(i), OP), i)])
        counter.reset()
        st.commit([retire_scope(OP)])
        assert dict(counter.calls) == {
            "TransactWriteItems": 1,
            "ListObjectsV2": pages,
            "DeleteObjects": pages,
            "UpdateItem": 1,  # the finished cleanup leaves the head's pending set
        }
    assert env.object_keys(f"t/sessions/{sid}/") == []


def test_the_endpoint_falls_back_to_aws_endpoint_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4599")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    from turnkeep.storage import open_repository

    repo = open_repository("aws://?table=fallback-table&bucket=fallback-bucket&prefix=x")

    assert repo.s3.meta.endpoint_url == "http://127.0.0.1:4599"  # type: ignore[attr-defined]
    assert repo.dynamodb.meta.endpoint_url == "http://127.0.0.1:4599"  # type: ignore[attr-defined]


def test_a_repository_from_a_url_makes_its_s3_client_only_when_an_object_is_written(
    env: Env, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cold process that touches no scoped object (the API's reads) never builds an S3 client.
    from turnkeep.plumbing import clients as aws_clients

    monkeypatch.setattr(aws_clients, "_CLIENTS", {})
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    url = f"aws://?table={env.table}&bucket={env.bucket}&prefix=lazy-{sid}"
    repo = repository_from_url(urlsplit(url))

    def services() -> list[str]:
        return sorted(service for service, _region, _endpoint in aws_clients._CLIENTS)

    with repo.open(sid) as store:
        store.commit([set_value(value("k"), {"n": 1})])
        assert services() == ["dynamodb"]
        store.commit([set_value(value("frame", scope=OP), {"n": 2})])
    assert services() == ["dynamodb", "s3"]
    assert env.object_keys(f"lazy-{sid}/sessions/{sid}/") != []


def test_a_failed_cleanup_hides_retired_objects_and_the_next_open_deletes_only_them(
    env: Env, sid: str
) -> None:
    repo = env.repo()
    with repo.open(sid) as st:
        st.commit([set_value(value("p", "old", OP), "old")])

        def refuse(**_: Any) -> None:
            raise RuntimeError("injected S3 outage")

        env.s3.meta.events.register("before-call.s3.DeleteObjects", refuse)
        try:
            with pytest.raises(RuntimeError):
                st.commit([retire_scope(OP)])
        finally:
            env.s3.meta.events.unregister("before-call.s3.DeleteObjects", refuse)
    prefix = ObjectKeys("t").scope_prefix(sid, OP.id)
    assert len(env.object_keys(prefix)) == 1  # retired object still physically present
    with env.repo().open(sid) as st:
        assert st.get_value(value("p", "old", OP)) is None
        st.commit([set_value(value("p", "new", OP), "new")])  # later lifetime
    with env.repo().open(sid) as st:
        assert st.get_value(value("p", "old", OP)) is None
        new = st.get_value(value("p", "new", OP))
        assert new is not None
        assert new.value == "new"
    remaining = env.object_keys(prefix)
    assert len(remaining) == 1
    assert remaining[0].endswith(f"{new.seq:020d}.json")


def test_a_cleanup_refused_by_s3_leaves_a_pending_marker_the_next_head_read_clears(
    env: Env, sid: str
) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(value("p", "k", OP), 1)])
        original = env.s3.delete_objects
        env.s3.delete_objects = lambda **kw: {"Errors": [{"Key": "x", "Code": "AccessDenied"}]}
        try:
            st.commit([retire_scope(OP)])  # the commit itself succeeds
        finally:
            env.s3.delete_objects = original
        assert st.get_value(value("p", "k", OP)) is None
    head = next(i for i in env.items(sid) if i["sk"]["S"] == HEAD_SK)
    assert len(head["pending"]["SS"]) == 1
    with env.repo().open(sid) as st:
        st.get_stats()  # the first head read retries the cleanup and records it done
        assert env.object_keys(ObjectKeys("t").scope_prefix(sid, OP.id)) == []
    head = next(i for i in env.items(sid) if i["sk"]["S"] == HEAD_SK)
    assert "pending" not in head


def test_delete_session_removes_every_item_and_object_but_not_the_envelope(
    env: Env, sid: str
) -> None:
    env.ddb.put_item(
        TableName=env.table, Item={"pk": {"S": session_pk(sid)}, "sk": {"S": "ENVELOPE"}}
    )
    repo = env.repo()
    with repo.open(sid) as st:
        st.commit([set_value(value("a"), 1), insert_entry("e", None, "message")])
        st.commit([set_value(value("p", "k", OP), 1)])
        st.commit([set_value(value("p", "k", ephemeral_scope("other")), 1)])
    repo.delete_session(sid)
    assert [i["sk"]["S"] for i in env.items(sid)] == ["ENVELOPE"]
    assert env.object_keys(f"t/sessions/{sid}/") == []
    with repo.open(sid) as st:
        assert st.commit([set_value(value("a"), 2)]).seqs == (1,)
        assert st.get_value(value("p", "k", OP)) is None


def test_list_sessions_names_each_session_that_committed_sorted() -> None:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        create_table(ddb, "listing")
        create_bucket(s3, "listing-bucket")
        repo = AwsRepository("listing", "listing-bucket", dynamodb_client=ddb, s3_client=s3)
        with repo.open("b") as st:
            st.commit([set_value(value("a"), 1)])
        with repo.open("a") as st:
            st.commit([set_value(value("a", "", OP), 1)])
        assert repo.list_sessions() == ["a", "b"]
        repo.delete_session("b")
        assert repo.list_sessions() == ["a"]


def test_commits_that_always_lose_the_head_race_fail_with_a_conflict_and_apply_nothing(
    env: Env, sid: str
) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(value("a"), 1)])
        rival = env.repo().open(sid)

        def bump(**_: Any) -> None:
            env.ddb.meta.events.unregister("before-call.dynamodb.TransactWriteItems", bump)
            rival.commit([set_value(value("p", "k", OP), 1)])  # moves the head
            env.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", bump)

        env.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", bump)
        try:
            with pytest.raises(StorageConflictError, match="concurrent writers"):
                st.commit([set_value(value("a"), 2)])
        finally:
            env.ddb.meta.events.unregister("before-call.dynamodb.TransactWriteItems", bump)
        stored = st.get_value(value("a"))
        assert stored is not None
        assert stored.value == 1
        rival.close()


def test_clients_come_from_an_injected_boto3_session(env: Env, sid: str) -> None:
    session = boto3.session.Session(region_name=REGION)
    repo = AwsRepository(env.table, env.bucket, "t", session=session)
    with repo.open(sid) as st:
        assert st.commit([set_value(value("a"), 1)]).seqs == (1,)


def test_storage_urls_name_table_bucket_prefix_region_and_endpoint(
    env: Env, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    url = f"aws://?table={env.table}&bucket={env.bucket}&prefix=urlp&region={REGION}"
    with open_storage(url, sid) as st:
        st.commit([set_value(value("p", "k", OP), 1)])
    assert env.object_keys(f"urlp/sessions/{sid}/")
    repo = repository_from_url(urlsplit(url + "&endpoint=http://localhost:5999"))
    assert repo.s3.meta.endpoint_url == "http://localhost:5999"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("aws://?bucket=b", "table="),
        ("aws://?table=t", "bucket="),
        ("aws://?table=t&bucket=b&colour=red", "unknown parameter"),
        ("aws://host/path?table=t&bucket=b", "must look like"),
    ],
)
def test_bad_storage_urls_are_rejected_naming_the_problem(url: str, message: str) -> None:
    with pytest.raises(StorageValidationError, match=message):
        open_storage(url, "s1")


def test_a_rejected_duplicate_entry_keeps_the_cached_head_so_the_next_commit_costs_one(
    env: Env, sid: str, counter: RequestCounter
) -> None:
    with env.repo().open(sid) as st:
        st.commit([insert_entry("e1", None, "message")])
        with pytest.raises(EntryConflictError, match="'e1' already exists"):
            st.commit([insert_entry("e1", None, "message")])
        with pytest.raises(EntryConflictError, match="parent 'nope'"):
            st.commit([insert_entry("e2", "nope", "message")])
        counter.reset()
        assert st.commit([insert_entry("e2", "e1", "message")]).seqs == (2,)
        assert dict(counter.calls) == {"TransactWriteItems": 1}


@given(strategies.text(max_size=12), strategies.text(max_size=12))
def test_key_escaping_keeps_prefixes_and_never_merges_two_parts(a: str, b: str) -> None:
    assert escape(a + b).startswith(escape(a))
    assert unescape(escape(a)) == a
    assert "#" not in escape(a)
    assert (value_sk(a, b) == value_sk(b, a)) == (a == b)


RUNNING = value("turn.op", "op-1")


def test_a_guarded_scoped_commit_costs_two_requests_and_a_missing_guard_consumes_nothing(
    env: Env, sid: str, counter: RequestCounter
) -> None:
    with env.repo().open(sid) as st:
        st.commit([set_value(RUNNING, "running")])
        counter.reset()
        result = st.commit([append_list(value_list("f", "", OP), "x")], guard=RUNNING)
        assert dict(counter.calls) == {"TransactWriteItems": 1, "PutObject": 1}
        assert result.seqs == (2,)
        st.commit([delete_value(RUNNING), retire_scope(OP)])
        with pytest.raises(GuardFailedError, match=r"turn\.op"):
            st.commit([append_list(value_list("f", "", OP), "late")], guard=RUNNING)
        assert st.commit([set_value(value("probe"), 1)]).seqs == (5,)


def test_a_guarded_write_racing_the_terminal_commit_stays_hidden_behind_the_retirement(
    env: Env, sid: str
) -> None:
    frames = value_list("f", "", OP)
    with env.repo().open(sid) as st:
        st.commit([set_value(RUNNING, "running")])
        terminal = env.repo().open(sid)

        def finish_first(**_: Any) -> None:
            # The guard check passed and sequences are allocated; the terminal commit lands
            # before the object is written.
            env.s3.meta.events.unregister("before-call.s3.PutObject", finish_first)
            terminal.commit([delete_value(RUNNING), retire_scope(OP)])

        env.s3.meta.events.register("before-call.s3.PutObject", finish_first)
        late = st.commit([append_list(frames, "late")], guard=RUNNING)
        terminal.close()
    with env.repo().open(sid) as st:
        assert st.read_list(frames) == []
        boundary = next(i for i in env.items(sid) if i["sk"]["S"] == f"S#R#{OP.id}")
        assert late.seqs[0] < int(boundary["seq"]["N"])


def test_a_late_write_hidden_by_a_foreign_retirement_stays_hidden_after_reuse_in_its_process(
    env: Env, sid: str
) -> None:
    """The writer process had the scope loaded; another process retired it meanwhile.

    Its late write (sequences allocated before the retirement) must not surface in the writer
    process either, not even once the scope id is reused, and never after a reopen.
    """
    frames = value_list("f", "", OP)
    with env.repo().open(sid) as st:
        st.commit([set_value(RUNNING, "running")])
        st.commit([append_list(frames, "early")], guard=RUNNING)
        assert [e.value for e in st.read_list(frames)] == ["early"]  # the scope is loaded
        terminal = env.repo().open(sid)  # another process

        def finish_first(**_: Any) -> None:
            env.s3.meta.events.unregister("before-call.s3.PutObject", finish_first)
            terminal.commit([delete_value(RUNNING), retire_scope(OP)])

        env.s3.meta.events.register("before-call.s3.PutObject", finish_first)
        st.commit([append_list(frames, "late")], guard=RUNNING)
        terminal.close()
        # The scope id is reused by a new lifetime in the writer process.
        st.commit([set_value(RUNNING, "running again")])
        reborn = st.commit([append_list(frames, "reborn")], guard=RUNNING)
        assert [e.value for e in st.read_list(frames)] == ["reborn"]
    for _ in range(2):
        with env.repo().open(sid) as st:
            assert [(e.value, e.seq) for e in st.read_list(frames)] == [
                ("reborn", reborn.first_seq)
            ]
    with env.repo().open(sid) as st:
        st.commit([retire_scope(OP)])
        st.commit([append_list(frames, "third lifetime")])
    with env.repo().open(sid) as st:
        assert [e.value for e in st.read_list(frames)] == ["third lifetime"]
    # Every object of the earlier lifetimes, the late one included, is gone by now.
    assert len(env.object_keys(ObjectKeys("t").scope_prefix(sid, OP.id))) == 1


def test_a_loaded_scope_does_not_keep_showing_data_another_process_retired(
    env: Env, sid: str
) -> None:
    frames = value_list("f", "", OP)
    with env.repo().open(sid) as st:
        st.commit([append_list(frames, "old")])
        assert [e.value for e in st.read_list(frames)] == ["old"]
        with env.repo().open(sid) as other:
            other.commit([retire_scope(OP)])
        st.commit([append_list(frames, "new")])  # reuse in the process that had it loaded
        assert [e.value for e in st.read_list(frames)] == ["new"]
