"""The spend ledger on each of its backends, for the tests (docs/usage.md, "Budgets")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from moto import mock_aws

from tests.support.aws_template import create_table
from tests.support.envelope_stores import SerializedClient, moto_dynamodb_client
from turnkeep.spend.ledger import MemoryLedger, SpendLedger
from turnkeep.spend.ledger_dynamodb import DynamoLedger
from turnkeep.spend.ledger_sqlite import SqliteLedger


@contextmanager
def open_test_ledger(kind: str, tmp_path: Path) -> Iterator[SpendLedger]:
    """A fresh ledger of `kind` (memory, sqlite, dynamodb under moto), closed after."""
    if kind == "memory":
        yield MemoryLedger()
        return
    if kind == "sqlite":
        made = SqliteLedger(str(tmp_path / "ledger.db"))
        try:
            yield made
        finally:
            made.close()
        return
    with mock_aws():
        raw = moto_dynamodb_client()
        table = f"ledger-{uuid.uuid4().hex[:10]}"
        create_table(raw, table)
        yield DynamoLedger(SerializedClient(raw), table)  # type: ignore[arg-type]
