"""DynamoDB specifics: item layout, field-level UpdateItem requests, retry and error mapping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from tests.conformance.envelope_backends import EnvelopeBackend, envelope_backend
from turnkeep.envelope import (
    HOST_META_KEYS,
    EnvelopeConflictError,
    EnvelopeUnavailableError,
    open_envelope_store,
)
from turnkeep.envelope.dynamodb import DynamoEnvelopeStore


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[EnvelopeBackend]:
    """DynamoDB on moto with a request log."""
    with envelope_backend("dynamodb", tmp_path) as harness:
        yield harness


def _store(stores: EnvelopeBackend) -> DynamoEnvelopeStore:
    store = stores.store()
    assert isinstance(store, DynamoEnvelopeStore)
    return store


def _calls(stores: EnvelopeBackend) -> list[tuple[str, dict[str, Any]]]:
    assert stores.client is not None
    return stores.client.calls


def _raw_item(store: DynamoEnvelopeStore, session_id: str) -> dict[str, Any]:
    item: dict[str, Any] = store.client.get_item(
        TableName=store.table,
        Key={"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": "ENVELOPE"}},
    )["Item"]
    return item


def test_envelope_item_uses_the_session_partition_and_owner_index_keys(
    stores: EnvelopeBackend,
) -> None:
    store = _store(stores)
    store.create("s1", "alice", {"title": "t", "archived": True})
    item = _raw_item(store, "s1")
    assert item["pk"] == {"S": "SESSION#s1"}
    assert item["sk"] == {"S": "ENVELOPE"}
    assert item["gsi1pk"] == {"S": "OWNER#alice"}
    assert item["gsi1sk"] == {"S": "SESSION#s1"}
    assert item["m_title"] == {"S": "t"}
    assert item["m_archived"] == {"BOOL": True}
    assert item["createdAt"] == item["updatedAt"] == {"N": str(stores.clock.now)}


def test_worker_write_is_one_update_item_naming_only_its_attributes(
    stores: EnvelopeBackend,
) -> None:
    store = _store(stores)
    store.create("s1", "alice", {"title": "t"})
    stores.clock.now += 1
    _calls(stores).clear()
    store.update_worker_meta("s1", {"workingNotes": "n", "turnError": None})
    assert [name for name, _ in _calls(stores)] == ["update_item"]
    request = _calls(stores)[0][1]
    touched = set(request["ExpressionAttributeNames"].values())
    assert touched == {"pk", "updatedAt", "m_workingNotes", "m_turnError"}
    assert "REMOVE" in request["UpdateExpression"]
    assert "attribute_exists" in request["ConditionExpression"]
    assert "<" in request["ConditionExpression"]


def test_host_put_is_one_update_item_touching_only_host_attributes(
    stores: EnvelopeBackend,
) -> None:
    store = _store(stores)
    store.create("s1", "alice")
    stores.clock.now += 1
    _calls(stores).clear()
    store.put_host_meta("s1", "alice", {"title": "t"})
    assert [name for name, _ in _calls(stores)] == ["update_item"]
    names = set(_calls(stores)[0][1]["ExpressionAttributeNames"].values())
    meta_names = {n.removeprefix("m_") for n in names if n.startswith("m_")}
    assert meta_names == set(HOST_META_KEYS)
    assert names - {f"m_{k}" for k in HOST_META_KEYS} == {"pk", "updatedAt", "ownerId"}


def test_same_millisecond_write_retries_once_with_stored_plus_one(
    stores: EnvelopeBackend,
) -> None:
    store = _store(stores)
    created = store.create("s1", "alice")
    _calls(stores).clear()
    after = store.update_worker_meta("s1", {"turnStatus": "running"})  # clock did not move
    assert [name for name, _ in _calls(stores)] == ["update_item", "update_item"]
    assert after.updated_at == created.updated_at + 1


def test_losing_the_updated_at_race_twice_is_a_conflict_and_writes_nothing(
    stores: EnvelopeBackend,
) -> None:
    store = _store(stores)
    rival = _store(stores)
    store.create("s1", "alice")
    assert stores.client is not None
    racing = {"on": True}

    def rival_writes_first(operation: str, params: dict[str, Any]) -> None:
        # Before each of our UpdateItems, another writer lands a newer updatedAt.
        if racing["on"] and operation == "update_item":
            racing["on"] = False
            rival.update_worker_meta("s1", {"turnStepCount": 1})
            racing["on"] = True

    stores.client.before = rival_writes_first
    with pytest.raises(EnvelopeConflictError, match="won twice"):
        store.update_worker_meta("s1", {"workingNotes": "lost?"})
    stores.client.before = None
    got = store.get("s1")
    assert got is not None
    assert got.meta == {"turnStepCount": 1}


def test_delete_and_list_leave_session_storage_items_alone(
    stores: EnvelopeBackend,
) -> None:
    store = _store(stores)
    store.create("s1", "alice")
    storage_item = {
        "pk": {"S": "SESSION#s1"},
        "sk": {"S": "S#HEAD"},
        "gsi1pk": {"S": "OWNER#alice"},
    }
    storage_item["gsi1sk"] = {"S": "S#HEAD"}
    store.client.put_item(TableName=store.table, Item=storage_item)
    assert [e.session_id for e in store.list_for_owner("alice")] == ["s1"]
    store.delete("s1")
    left = store.client.query(
        TableName=store.table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "SESSION#s1"}},
    )["Items"]
    assert [i["sk"]["S"] for i in left] == ["S#HEAD"]


def test_list_for_owner_pages_through_more_than_one_batch_get(
    stores: EnvelopeBackend,
) -> None:
    store = _store(stores)
    for i in range(130):
        store.create(f"s{i:03d}", "alice")
    listed = store.list_for_owner("alice")
    assert [e.session_id for e in listed] == [f"s{i:03d}" for i in range(130)]
    assert sum(1 for name, _ in _calls(stores) if name == "batch_get_item") == 2


class _FailingClient:
    """A client whose every call raises `error`."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def fail(**_: Any) -> Any:
            raise self.error

        return fail


@pytest.mark.parametrize(
    "error",
    [
        ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "UpdateItem"),
        ClientError({"Error": {"Code": "ResourceNotFoundException"}}, "UpdateItem"),
        EndpointConnectionError(endpoint_url="https://dynamodb.example"),
    ],
)
def test_service_errors_become_unavailable_errors(error: Exception) -> None:
    store = DynamoEnvelopeStore(_FailingClient(error), "T")  # type: ignore[arg-type]
    with pytest.raises(EnvelopeUnavailableError, match="DynamoDB"):
        store.update_worker_meta("s1", {"workingNotes": "x"})
    with pytest.raises(EnvelopeUnavailableError):
        store.get("s1")
    with pytest.raises(EnvelopeUnavailableError):
        store.create("s1", "alice")


def test_missing_table_is_unavailable_not_a_crash(stores: EnvelopeBackend) -> None:
    assert stores.client is not None
    store = DynamoEnvelopeStore(stores.client, "no-such-table")  # type: ignore[arg-type]
    with pytest.raises(EnvelopeUnavailableError, match="ResourceNotFound"):
        store.get("s1")


def test_aws_url_builds_a_client_for_the_named_table(stores: EnvelopeBackend) -> None:
    table = _store(stores).table
    store = open_envelope_store(f"aws://?table={table}&region=us-east-1")
    try:
        assert isinstance(store, DynamoEnvelopeStore)
        store.create("s1", "alice", {"title": "via url"})
        assert stores.store().get("s1") is not None
    finally:
        store.close()


def test_poison_pin_on_the_retry_is_still_a_compare_and_set(
    stores: EnvelopeBackend,
) -> None:
    store = _store(stores)
    rival = _store(stores)
    store.create("s1", "alice")
    stores.poke_raw(store, "s1", "turnStatus", "sleeping")
    assert stores.client is not None
    updates: list[str] = []

    def rival_swaps_the_poison(operation: str, params: dict[str, Any]) -> None:
        # Between our first attempt (which sees the poison) and the pinned retry, another
        # writer replaces it with a real running turn: the retry must not clobber that turn.
        if operation == "update_item" and params.get("TableName") == store.table:
            updates.append(params["ConditionExpression"])
            if len(updates) == 2:
                stores.client.before = None  # type: ignore[union-attr]
                rival.update_worker_meta("s1", {"turnStatus": "running", "turnRunId": "op-r"})

    stores.client.before = rival_swaps_the_poison
    with pytest.raises(EnvelopeConflictError):
        store.update_worker_meta(
            "s1", {"turnStatus": "running", "turnRunId": "op-1"}, expect={"turnStatus": [None]}
        )
    got = store.get("s1")
    assert got is not None
    assert got.meta == {"turnStatus": "running", "turnRunId": "op-r"}
