"""The environment the deployed Lambda functions see, for tests that import their handlers:
the template's variables pointed at a moto table and bucket (one copy for every such test)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.support.aws_template import create_bucket, create_table, load_template
from turnkeep.aws_lambda import container


def lambda_environment(table: str, bucket: str, **extra: str) -> dict[str, str]:
    """The functions' variables (template Globals) on `table` and `bucket`, plus `extra`."""
    return {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "TURNKEEP_STORAGE_URL": f"aws://?table={table}&bucket={bucket}&prefix=tk",
        "TURNKEEP_ENVELOPE_URL": f"aws://?table={table}",
        "TURNKEEP_MODEL": "scripted",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "turnkeep",
        **extra,
    }


@contextmanager
def lambda_deployment(
    monkeypatch: pytest.MonkeyPatch,
    table: str,
    bucket: str,
    *,
    template: Mapping[str, Any] | None = None,
    moto_config: Mapping[str, Any] | None = None,
    **extra: str,
) -> Iterator[None]:
    """Inside moto: the environment set, the template's table and bucket created, and a fresh
    per-container runtime on entry and exit."""
    for key, value in lambda_environment(table, bucket, **extra).items():
        monkeypatch.setenv(key, value)
    with mock_aws(config=dict(moto_config) if moto_config is not None else None):
        rendered = template if template is not None else load_template()
        create_table(boto3.client("dynamodb"), table, rendered)
        create_bucket(boto3.client("s3"), bucket, rendered)
        container.reset_runtime()
        try:
            yield
        finally:
            container.reset_runtime()
