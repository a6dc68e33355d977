"""The console uploads an attachment from the browser straight to S3's presigned POST only when
the bucket's CORS rule names the console's origin (docs/attachments.md, "Upload from a
browser"): headless Debian chromium runs the console of a real API server whose storage is
DynamoDB + S3 (moto behind the policy-enforcing S3 stand-in, which decides CORS as S3 does);
the bucket gets the template's rule for `CorsAllowOrigins`. With the console's origin the file
is attached and reaches the model; with another origin the browser withholds S3's answer and
the console says the file was not attached."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.e2e.test_console_browser import (
    TURN_MS,
    connect,
    last_turn,
    new_session,
    send,
    serving,
    wait_status,
)
from tests.support import attachment_files as files
from tests.support.aws_template import bucket_cors_rules, create_bucket, create_table
from tests.support.browser import chromium
from tests.support.real_server import RealServer
from tests.support.s3_post_policy import REGION, policy_enforcing_s3

pytestmark = pytest.mark.slow


def _client(service: str, endpoint: str) -> Any:
    return boto3.client(
        service,
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[str, list[str]]]:
    with policy_enforcing_s3() as (endpoint, _moto, refusals):
        yield endpoint, refusals


@pytest.fixture
def aws_server(tmp_path: Path, s3: tuple[str, list[str]]) -> Iterator[tuple[RealServer, str]]:
    """A real API server on a fresh table and bucket behind the stand-in; (server, bucket)."""
    endpoint, _ = s3
    name = f"cors-{uuid.uuid4().hex[:12]}"
    create_table(_client("dynamodb", endpoint), name)
    create_bucket(_client("s3", endpoint), name)
    env = {
        "TURNKEEP_MODEL": "scripted",
        "TURNKEEP_STORAGE_URL": (
            f"aws://?table={name}&bucket={name}&region={REGION}&endpoint={endpoint}"
        ),
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": REGION,
    }
    with serving(tmp_path / "data", env) as real:
        yield real, name


def _allow(endpoint: str, bucket: str, origin: str) -> None:
    """The template's CORS rule on `bucket` for `CorsAllowOrigins=origin`."""
    rules = bucket_cors_rules(parameters={"CorsAllowOrigins": origin})
    _client("s3", endpoint).put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": rules})


def test_the_console_uploads_to_s3_from_its_own_origin_and_the_model_gets_the_file(
    aws_server: tuple[RealServer, str], s3: tuple[str, list[str]], tmp_path: Path
) -> None:
    server, bucket = aws_server
    endpoint, refusals = s3
    _allow(endpoint, bucket, server.url)
    png = files.image("PNG", (24, 12))
    (tmp_path / "shot.png").write_bytes(png)
    with chromium() as browser:
        page = browser.new_page()
        connect(page, server, "ines")
        new_session(page, "upload to s3")
        with page.expect_response(lambda r: r.request.method == "POST" and bucket in r.url) as up:
            page.set_input_files("#attach-input", str(tmp_path / "shot.png"))
        assert up.value.status == 204
        page.wait_for_selector("#attach-list .attachment[data-name='shot.png']", timeout=TURN_MS)
        turn = send(page, "look")
        wait_status(page, "completed", turn)
        reply = last_turn(page).locator(".msg.assistant .bubble-text").last.inner_text()
    assert f"Attached: shot.png (image/png, {len(png)} bytes, sha256 {files.sha256(png)[:12]})" in (
        reply
    )
    assert "CORSResponse" not in refusals


def test_the_console_of_an_origin_the_bucket_does_not_name_cannot_attach(
    aws_server: tuple[RealServer, str], s3: tuple[str, list[str]], tmp_path: Path
) -> None:
    server, bucket = aws_server
    endpoint, _ = s3
    _allow(endpoint, bucket, "https://console.example.com")
    (tmp_path / "shot.png").write_bytes(files.image())
    with chromium() as browser:
        page = browser.new_page()
        connect(page, server, "ines")
        new_session(page, "upload refused")
        page.set_input_files("#attach-input", str(tmp_path / "shot.png"))
        refusal = page.locator("#attach-error")
        refusal.wait_for(state="visible", timeout=TURN_MS)
        shown = refusal.inner_text()
        attached = page.locator("#attach-list .attachment").count()
    assert "shot.png was not attached" in shown
    assert attached == 0
