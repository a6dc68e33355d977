"""The aws backend against moto's standalone server: clients reach it through endpoint_url."""

from __future__ import annotations

from typing import Any

import boto3
import httpx
from moto.server import ThreadedMotoServer

from tests.support.aws_template import create_bucket, create_table
from turnkeep.storage import ephemeral_scope, set_value, value
from turnkeep.storage.aws import AwsRepository

REGION = "us-east-1"
OP = ephemeral_scope("op-1")


def test_the_same_code_runs_against_moto_server_through_an_endpoint_url() -> None:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        options: dict[str, Any] = {
            "region_name": REGION,
            "endpoint_url": endpoint,
            "aws_access_key_id": "test",
            "aws_secret_access_key": "test",
        }
        create_table(boto3.client("dynamodb", **options), "served")
        create_bucket(boto3.client("s3", **options), "served-bucket")
        session = boto3.session.Session(
            aws_access_key_id="test", aws_secret_access_key="test", region_name=REGION
        )
        repo = AwsRepository("served", "served-bucket", session=session, endpoint_url=endpoint)
        with repo.open("served-session") as handle:
            handle.commit([set_value(value("a"), 1)])
            handle.commit([set_value(value("p", "k", OP), 2)])
        with repo.open("served-session") as handle:
            scoped = handle.get_value(value("p", "k", OP))
            assert scoped is not None
            assert scoped.value == 2
        assert repo.list_sessions() == ["served-session"]
        # The objects really live in the server process (no in-process mock answered).
        state = httpx.get(f"{endpoint}/moto-api/data.json", timeout=10).json()
        assert "served-bucket" in str(state["s3"])
    finally:
        server.stop()
