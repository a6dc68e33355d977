"""S3 deletion of retired scoped objects and of a deleted session's objects."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from botocore.exceptions import BotoCoreError, ClientError

from turnkeep.storage.aws.keys import seq_from_key
from turnkeep.storage.errors import StorageUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

LOG = logging.getLogger(__name__)
DELETE_BATCH: Final = 1000
"""DeleteObjects accepts at most 1000 keys; ListObjectsV2 pages hold at most 1000."""


def _object_seq(key: str) -> int | None:
    try:
        return seq_from_key(key)
    except ValueError:
        return None


def _delete(s3: S3Client, bucket: str, keys: list[str]) -> None:
    if not keys:
        return
    result = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
    )
    errors = result.get("Errors", [])
    if errors:
        first = errors[0]
        raise StorageUnavailableError(
            f"S3 refused to delete {len(errors)} object(s), e.g. {first.get('Key')!r}: "
            f"{first.get('Code')} {first.get('Message')}"
        )


def delete_through(s3: S3Client, bucket: str, prefix: str, boundary: int) -> int:
    """Delete the transaction objects under `prefix` named by a seq <= `boundary`.

    Object names sort by sequence, so listing stops at the first later-lifetime object; costs
    one ListObjectsV2 and at most one DeleteObjects per 1000 objects. Returns how many went.
    """
    deleted = 0
    paginator = s3.get_paginator("list_objects_v2")
    try:
        for page in paginator.paginate(
            Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": DELETE_BATCH}
        ):
            batch: list[str] = []
            reached_later_lifetime = False
            for obj in page.get("Contents", []):
                key = obj["Key"]
                seq = _object_seq(key[len(prefix) :])
                if seq is None:
                    continue  # not ours: never delete what we cannot date
                if seq > boundary:
                    reached_later_lifetime = True
                    break
                batch.append(key)
            _delete(s3, bucket, batch)
            deleted += len(batch)
            if reached_later_lifetime:
                break
    except (BotoCoreError, ClientError) as exc:
        raise StorageUnavailableError(f"deleting retired objects under {prefix!r}: {exc}") from exc
    return deleted


def delete_all(s3: S3Client, bucket: str, prefix: str) -> int:
    """Delete every object under `prefix` (session deletion)."""
    deleted = 0
    paginator = s3.get_paginator("list_objects_v2")
    try:
        for page in paginator.paginate(
            Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": DELETE_BATCH}
        ):
            keys = [obj["Key"] for obj in page.get("Contents", [])]
            _delete(s3, bucket, keys)
            deleted += len(keys)
    except (BotoCoreError, ClientError) as exc:
        raise StorageUnavailableError(f"deleting objects under {prefix!r}: {exc}") from exc
    return deleted
