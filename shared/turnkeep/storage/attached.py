"""Items of another store that live beside a session's storage items (the session envelope in
the same DynamoDB table): read in the storage's batched reads and written inside its session
transactions, so a step pays one request where it paid two (docs/aws-storage.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class AttachedKey:
    """An item of `table` by its key: partition key `pk` and sort key `sk` (strings)."""

    table: str
    pk: str
    sk: str


@dataclass(frozen=True, slots=True)
class AttachedUpdate:
    """A conditional update of another store's item, applied in a storage session transaction.

    `action(seqs)` returns the TransactWriteItems action given the sequences the commit
    assigns (so the item can record them); its condition failing cancels the whole commit with
    `AttachedConditionError`.
    """

    table: str
    action: Callable[[tuple[int, ...]], dict[str, Any]]
