"""Why DynamoDB cancelled a session transaction, as the storage's errors: a guard or an
attached condition that failed, a duplicate entry id, a missing parent; a race is left to the
caller's retry (docs/aws-storage.md)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from turnkeep.storage.addresses import Value
from turnkeep.storage.aws.session_txn import ActionMeta
from turnkeep.storage.errors import (
    AttachedConditionError,
    StorageUnavailableError,
    StorageValidationError,
)
from turnkeep.storage.refusals import duplicate_entry, guard_failed, missing_parent


def cancel_reasons(exc: ClientError) -> list[dict[str, Any]]:
    """One reason per action of a cancelled transaction (`{"Code": "None"}` = it passed)."""
    raw: Any = exc.response.get("CancellationReasons", [])
    return [{k: v for k, v in dict(r).items() if k in ("Code", "Message", "Item")} for r in raw]


def raise_cancel_cause(
    exc: ClientError,
    metas: list[ActionMeta | None],
    guard: Value | None,
    guard_seq: int | None,
) -> None:
    """Raise the caller's error behind a cancelled transaction; return when it was a race.

    The guard is checked first, then duplicate ids, then parents (the memory backend's order).
    """
    failed: dict[str, list[ActionMeta]] = {}
    attached_item: Any = None
    for index, reason in enumerate(cancel_reasons(exc)):
        code = reason.get("Code")
        if code in (None, "None"):
            continue
        meta = metas[index] if index < len(metas) else None
        if code == "ConditionalCheckFailed" and meta is not None:
            failed.setdefault(meta.kind, []).append(meta)
            if meta.kind == "attached":
                attached_item = reason.get("Item")
        elif code == "ValidationError":
            raise StorageValidationError(
                f"DynamoDB rejected the session transaction: {reason.get('Message')}"
            )
        elif code != "TransactionConflict":
            raise StorageUnavailableError(
                f"DynamoDB cancelled the session transaction: {code} {reason.get('Message')}"
            )
    if "guard" in failed and guard is not None:
        raise guard_failed(guard, guard_seq)
    if "attached" in failed:
        raise AttachedConditionError(
            "commit refused: the attached update's condition failed",
            attached_item,
        )
    if "duplicate" in failed:
        raise duplicate_entry(failed["duplicate"][0].entry_id)
    if "parent" in failed:
        meta = failed["parent"][0]
        raise missing_parent(meta.entry_id, meta.parent_id)
