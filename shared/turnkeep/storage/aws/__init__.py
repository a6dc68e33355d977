"""aws:// — session state in DynamoDB (one partition per session), scoped progress in S3.

URL: `aws://?table=T&bucket=B&prefix=P[&region=R&endpoint=E]`; the endpoint falls back to
`AWS_ENDPOINT_URL`, so the same URL works against AWS, moto in-process and moto's server.
Key design and limits: docs/aws-storage.md.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, cast
from urllib.parse import SplitResult, parse_qs

from turnkeep.plumbing.clients import shared_client
from turnkeep.storage.aws.repository import AwsRepository
from turnkeep.storage.aws.storage import AwsStorage
from turnkeep.storage.errors import StorageValidationError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client

__all__ = ["AwsRepository", "AwsStorage", "repository_from_url", "storage_from_url"]

_URL_PARAMS = frozenset({"table", "bucket", "prefix", "region", "endpoint"})
_REPOSITORIES: dict[tuple[str, ...], AwsRepository] = {}
_REGISTRY_LOCK = threading.Lock()


def _params(url: SplitResult) -> dict[str, str]:
    if url.netloc or url.path not in ("", "/"):
        raise StorageValidationError(
            "aws storage URL must look like aws://?table=T&bucket=B&prefix=P "
            f"(got host/path {url.netloc + url.path!r})"
        )
    raw = parse_qs(url.query, keep_blank_values=True)
    unknown = sorted(set(raw) - _URL_PARAMS)
    if unknown:
        raise StorageValidationError(
            f"aws storage URL has unknown parameter(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_URL_PARAMS))}"
        )
    repeated = sorted(k for k, v in raw.items() if len(v) > 1)
    if repeated:
        raise StorageValidationError(f"aws storage URL repeats parameter(s) {', '.join(repeated)}")
    params = {k: v[0] for k, v in raw.items()}
    for required in ("table", "bucket"):
        if not params.get(required):
            raise StorageValidationError(f"aws storage URL needs {required}=...")
    return params


def repository_from_url(url: SplitResult) -> AwsRepository:
    """The process-wide repository of the URL (clients and per-session caches are shared)."""
    params = _params(url)
    # The AWS SDK's own variable, not a turnkeep setting: read at open time, as boto3 reads it,
    # so a changed endpoint opens another repository (the endpoint is part of its identity).
    endpoint = params.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL") or ""
    region = params.get("region", "")
    prefix = params.get("prefix", "turnkeep")
    ident = (params["table"], params["bucket"], prefix, region, endpoint)
    with _REGISTRY_LOCK:
        repo = _REPOSITORIES.get(ident)
        if repo is None:
            dynamodb: DynamoDBClient = shared_client("dynamodb", region, endpoint)
            repo = AwsRepository(
                params["table"],
                params["bucket"],
                prefix,
                dynamodb_client=dynamodb,
                s3_factory=lambda: cast("S3Client", shared_client("s3", region, endpoint)),
            )
            _REPOSITORIES[ident] = repo
        return repo


def storage_from_url(url: SplitResult, session_id: str) -> AwsStorage:
    """A handle on `session_id` in the URL's repository."""
    return repository_from_url(url).open(session_id)
