"""Several writers (threads with their own clients, like separate Lambdas) on one session."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

from tests.support.aws_template import create_bucket, create_table
from turnkeep.storage import (
    append_list,
    ephemeral_scope,
    insert_entry,
    set_value,
    value,
    value_list,
)
from turnkeep.storage.aws import AwsRepository

REGION = "us-east-1"
WRITERS = 4
COMMITS = 6
SID = "shared-session"


@pytest.fixture(scope="module")
def clients() -> Iterator[list[tuple[Any, Any]]]:
    # moto's in-process backends are not thread-safe; the real services apply each request
    # atomically, so serialize request processing (never our client-side code) the same way.
    service_lock = threading.Lock()
    process = BotocoreStubber.process_request

    def atomic(self: BotocoreStubber, request: Any) -> Any:
        with service_lock:
            return process(self, request)

    with pytest.MonkeyPatch.context() as patch, mock_aws():
        patch.setattr(BotocoreStubber, "process_request", atomic)
        pairs = [
            (
                boto3.session.Session().client("dynamodb", region_name=REGION),
                boto3.session.Session().client("s3", region_name=REGION),
            )
            for _ in range(WRITERS + 1)
        ]
        create_table(pairs[0][0], "conc")
        create_bucket(pairs[0][1], "conc-bucket")
        yield pairs


def test_concurrent_writers_through_separate_clients_land_every_commit_once_with_unique_seqs(
    clients: list[tuple[Any, Any]],
) -> None:
    barrier = threading.Barrier(WRITERS)
    results: dict[int, list[tuple[str, tuple[int, ...]]]] = {}
    errors: list[BaseException] = []
    with AwsRepository(
        "conc", "conc-bucket", dynamodb_client=clients[0][0], s3_client=clients[0][1]
    ).open(SID) as st:
        st.commit([insert_entry("root", None, "message")])

    def writer(index: int) -> None:
        ddb, s3 = clients[index + 1]
        repo = AwsRepository("conc", "conc-bucket", dynamodb_client=ddb, s3_client=s3)
        mine: list[tuple[str, tuple[int, ...]]] = []
        try:
            with repo.open(SID) as st:
                barrier.wait()
                for j in range(COMMITS):
                    name = f"w{index}-{j}"
                    if j % 3 == 2:  # every third commit is scoped progress
                        scope = ephemeral_scope(f"op-{index}")
                        result = st.commit([append_list(value_list("frames", "", scope), name)])
                    else:
                        result = st.commit(
                            [
                                set_value(value("by", name), j),
                                append_list(value_list("all"), name),
                                insert_entry(name, "root", "message"),
                            ]
                        )
                    mine.append((name, result.seqs))
        except BaseException as exc:
            errors.append(exc)
        results[index] = mine

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    all_seqs = [seq for mine in results.values() for _, seqs in mine for seq in seqs]
    assert len(all_seqs) == len(set(all_seqs))
    session_commits = {
        name: seqs for mine in results.values() for name, seqs in mine if len(seqs) == 3
    }
    with AwsRepository(
        "conc", "conc-bucket", dynamodb_client=clients[0][0], s3_client=clients[0][1]
    ).open(SID) as st:
        listed = {e.value: e.seq for e in st.read_list(value_list("all"))}
        assert listed == {name: seqs[1] for name, seqs in session_commits.items()}
        for name, seqs in session_commits.items():
            stored = st.get_value(value("by", name))
            assert stored is not None
            assert stored.seq == seqs[0]
        entries = st.scan_entries()
        assert len(entries) == 1 + len(session_commits)
        assert st.get_stats().entry_count == 1 + len(session_commits)
        for index in range(WRITERS):
            frames = st.read_list(value_list("frames", "", ephemeral_scope(f"op-{index}")))
            expected = [(n, s[0]) for n, s in results[index] if len(s) == 1]
            assert [(e.value, e.seq) for e in frames] == expected
