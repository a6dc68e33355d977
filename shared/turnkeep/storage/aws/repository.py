"""AwsRepository: every session of one DynamoDB table + S3 bucket (+ key prefix)."""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

from turnkeep.plumbing.dynamodb_batches import batch_write
from turnkeep.storage.aws import keys
from turnkeep.storage.aws.cleanup import delete_all
from turnkeep.storage.aws.codec import get_s, s
from turnkeep.storage.aws.session_state import SessionState, aws_call
from turnkeep.storage.aws.storage import AwsStorage
from turnkeep.storage.base import Repository, validate_session_id
from turnkeep.storage.errors import StorageValidationError

if TYPE_CHECKING:
    from collections.abc import Callable

    import boto3
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client


class AwsRepository(Repository):
    """Sessions in one table (partition per session) with scoped progress in one bucket.

    Clients are injected (`dynamodb_client`, `s3_client` or an `s3_factory` called on first use)
    or made from `session` (default: a new boto3 session), so the same code runs on AWS, moto
    in-process and moto's server.
    """

    def __init__(
        self,
        table: str,
        bucket: str,
        prefix: str = "turnkeep",
        *,
        dynamodb_client: DynamoDBClient | None = None,
        s3_client: S3Client | None = None,
        s3_factory: Callable[[], S3Client] | None = None,
        session: boto3.session.Session | None = None,
        region_name: str | None = None,
        endpoint_url: str | None = None,
    ) -> None:
        if not isinstance(table, str) or not table:
            raise StorageValidationError("aws storage needs a DynamoDB table name")
        if not isinstance(bucket, str) or not bucket:
            raise StorageValidationError("aws storage needs an S3 bucket name")
        if not isinstance(prefix, str):
            raise StorageValidationError(f"aws storage prefix must be a string, got {prefix!r}")
        self.table = table
        self.bucket = bucket
        self.objects = keys.ObjectKeys(prefix)
        if dynamodb_client is None or (s3_client is None and s3_factory is None):
            import boto3  # only here: the shared clients (turnkeep.plumbing.clients) need no boto3

            boto = session or boto3.session.Session()
            options: dict[str, Any] = {}
            if region_name:
                options["region_name"] = region_name
            if endpoint_url:
                options["endpoint_url"] = endpoint_url
            dynamodb_client = dynamodb_client or boto.client("dynamodb", **options)
            if s3_client is None and s3_factory is None:
                s3_factory = functools.partial(boto.client, "s3", **options)
        self.dynamodb: DynamoDBClient = dynamodb_client
        self._s3: S3Client | None = s3_client
        self._s3_factory = s3_factory
        self._s3_lock = threading.Lock()
        self._sessions: dict[str, SessionState] = {}
        self._lock = threading.Lock()

    @property
    def s3(self) -> S3Client:
        """The S3 client, made on first use from `s3_factory` when none was given: building one
        costs a cold process tens of milliseconds, and a process that touches no scoped object
        (the API's session reads and turn starts) never needs it. Every step that loads a turn's
        operation scope lists it, so the step functions still build it on their first call."""
        client = self._s3
        if client is None:
            with self._s3_lock:
                if self._s3 is None:
                    assert self._s3_factory is not None  # __init__ sets one of the two
                    self._s3 = self._s3_factory()
                client = self._s3
        return client

    def open(self, session_id: str) -> AwsStorage:
        """A handle on `session_id` (no request: the head is read, and any pending retirement
        cleanup finished, on the first use that needs the head)."""
        validate_session_id(session_id)
        with self._lock:
            state = self._sessions.setdefault(session_id, SessionState())
            state.refs += 1
        return AwsStorage(self, session_id, state)

    def release(self, session_id: str, state: SessionState) -> None:
        """A handle closed: drop the shared caches once no handle of the session is open."""
        with self._lock:
            state.refs -= 1
            if state.refs <= 0 and self._sessions.get(session_id) is state:
                del self._sessions[session_id]

    def list_sessions(self) -> list[str]:
        """Sessions that committed at least once (their head items, through gsi1)."""
        found: set[str] = set()
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": keys.SESSIONS_GSI,
            "KeyConditionExpression": "gsi1pk = :g",
            "ExpressionAttributeValues": {":g": s(keys.SESSIONS_GSI_PK)},
        }
        with aws_call("listing sessions"):
            for page in self.dynamodb.get_paginator("query").paginate(**request):
                found.update(get_s(item, "gsi1sk") for item in page.get("Items", []))
        return sorted(found)

    def delete_session(self, session_id: str) -> None:
        """Remove the session's S3 objects, then its `S#` items (head last); the envelope stays.

        Objects go first so a half-finished delete never leaves scoped objects without the
        head and boundaries that date them; running it again finishes the job.
        """
        validate_session_id(session_id)
        delete_all(self.s3, self.bucket, self.objects.session_prefix(session_id))
        pk = keys.session_pk(session_id)
        sort_keys: list[str] = []
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {":pk": s(pk), ":p": s(keys.STORAGE_SK_PREFIX)},
            "ProjectionExpression": "sk",
            "ConsistentRead": True,
        }
        with aws_call(f"deleting session {session_id!r}"):
            for page in self.dynamodb.get_paginator("query").paginate(**request):
                sort_keys.extend(get_s(item, "sk") for item in page.get("Items", []))
            sort_keys.sort(key=lambda sk: sk == keys.HEAD_SK)  # head last
            batch_write(
                self.dynamodb,
                self.table,
                [{"DeleteRequest": {"Key": {"pk": s(pk), "sk": s(sk)}}} for sk in sort_keys],
            )
        with self._lock:
            state = self._sessions.get(session_id)
        if state is not None:
            with state.lock:
                state.forget()
