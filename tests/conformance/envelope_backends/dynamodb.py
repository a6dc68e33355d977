"""The DynamoDB envelope store on moto: handles share one fresh table, one request at a time."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from moto import mock_aws

from tests.conformance.envelope_backends import EnvelopeBackend
from tests.support.aws_template import create_table
from tests.support.envelope_stores import ManualClock, SerializedClient, moto_dynamodb_client
from turnkeep.envelope import EnvelopeStore
from turnkeep.envelope.dynamodb import DynamoEnvelopeStore


def _write_updated_at(store: EnvelopeStore, session_id: str, value: str) -> None:
    assert isinstance(store, DynamoEnvelopeStore)
    store.client.update_item(
        TableName=store.table,
        Key={"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": "ENVELOPE"}},
        UpdateExpression="SET updatedAt = :v",
        ExpressionAttributeValues={":v": {"S": value}},
    )


@contextmanager
def make(tmp_path: Path, clock: ManualClock) -> Iterator[EnvelopeBackend]:
    """Stores over one fresh table in moto (the mock lasts as long as the backend)."""
    with mock_aws():
        raw = moto_dynamodb_client()
        table = f"turnkeep-{uuid.uuid4().hex[:12]}"
        create_table(raw, table)
        client = SerializedClient(raw)
        yield EnvelopeBackend(
            "dynamodb",
            lambda: DynamoEnvelopeStore(client, table, clock=clock),  # type: ignore[arg-type]
            clock,
            _write_updated_at,
            client=client,
        )
