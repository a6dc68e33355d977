"""The aws backend in the conformance suite: moto in-process, resources from template.yaml."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from moto import mock_aws

from tests.conformance.backends import BackendHarness
from tests.support.aws_template import create_bucket, create_table
from turnkeep.plumbing.clients import shared_client
from turnkeep.storage import open_repository

REGION = "us-east-1"


def _client(service: str) -> Any:
    # Creating boto3 clients dominates setup time; moto intercepts reused clients too.
    return shared_client(service, REGION)


def make(tmp_path: Path) -> BackendHarness:
    """A fresh moto table + bucket (unique names) behind an aws:// URL; cleanup stops moto."""
    del tmp_path
    mock = mock_aws()
    mock.start()
    try:
        suffix = uuid.uuid4().hex[:12]
        table, bucket = f"turnkeep-{suffix}", f"turnkeep-{suffix}"
        create_table(_client("dynamodb"), table)
        create_bucket(_client("s3"), bucket)
    except BaseException:
        mock.stop()
        raise
    url = f"aws://?table={table}&bucket={bucket}&prefix=conformance&region={REGION}"
    return BackendHarness(
        name="aws", url=url, repository=lambda: open_repository(url), cleanup=mock.stop
    )
