"""A browser page of the console's origin may POST an attachment to the presigned S3 form and
read S3's answer; a page of another origin may not (docs/attachments.md, "Upload from a
browser"). The bucket gets the template's CORS rule (`CorsAllowOrigins` set to the console's
origin). moto's own server answers preflights by the Origin alone, which the first test shows;
the rest run against the S3 stand-in, which evaluates the rule as S3 does: origin, method and
requested headers, and no rule at all (tests/support/s3_cors.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.support import attachment_files as files
from tests.support.aws_template import create_bucket, create_table
from tests.support.s3_post_policy import client_of, policy_enforcing_s3
from turnkeep.attachments import AttachmentStore
from turnkeep.storage.aws import AwsRepository

CONSOLE = "http://127.0.0.1:8787"
ELSEWHERE = "http://127.0.0.1:9999"


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str, list[str]]]:
    with policy_enforcing_s3() as endpoints:
        yield endpoints


def _bucket(endpoint: str, origins: str | None = CONSOLE) -> str:
    name = f"cors-{uuid.uuid4().hex[:12]}"
    parameters = {} if origins is None else {"CorsAllowOrigins": origins}
    create_bucket(client_of("s3", endpoint), name, parameters=parameters)
    return name


def _preflight(url: str, origin: str, method: str = "POST", headers: str = "") -> httpx.Response:
    asked = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers:
        asked["Access-Control-Request-Headers"] = headers
    return httpx.options(url, headers=asked, timeout=30)


def test_motos_own_server_answers_the_console_origin_and_refuses_another(
    servers: tuple[str, str, list[str]],
) -> None:
    """moto (5.2) evaluates the Origin only: a method or header the rule does not allow and a
    bucket without CORS rules still get a 200, and its server adds blanket CORS headers to
    every answer, so only the status says anything here; the stand-in decides the rest."""
    _, moto, _ = servers
    url = f"{moto}/{_bucket(moto)}"

    allowed = _preflight(url, CONSOLE)
    refused = _preflight(url, ELSEWHERE)

    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-methods"] == "POST"
    assert refused.status_code == 403
    assert "CORSResponse" in refused.text


def test_a_preflight_of_the_consoles_post_succeeds_and_another_origin_is_refused(
    servers: tuple[str, str, list[str]],
) -> None:
    s3, _, _ = servers
    url = f"{s3}/{_bucket(s3)}"

    allowed = _preflight(url, CONSOLE, headers="content-type")
    refused = _preflight(url, ELSEWHERE, headers="content-type")

    assert allowed.status_code == 200, allowed.text
    assert allowed.headers["access-control-allow-origin"] == CONSOLE
    assert allowed.headers["access-control-allow-methods"] == "POST"
    assert allowed.headers["access-control-allow-headers"] == "content-type"
    assert allowed.headers["access-control-max-age"] == "600"
    assert refused.status_code == 403
    assert "CORSResponse" in refused.text
    assert "access-control-allow-origin" not in refused.headers


@pytest.mark.parametrize("method", ["PUT", "DELETE", "GET"])
def test_the_console_origin_may_not_send_any_other_method(
    servers: tuple[str, str, list[str]], method: str
) -> None:
    s3, _, _ = servers
    refused = _preflight(f"{s3}/{_bucket(s3)}/some-key", CONSOLE, method=method)

    assert refused.status_code == 403
    assert "access-control-allow-origin" not in refused.headers


@pytest.mark.parametrize("header", ["authorization", "x-amz-security-token", "x-amz-acl"])
def test_the_console_origin_may_not_send_other_headers(
    servers: tuple[str, str, list[str]], header: str
) -> None:
    s3, _, _ = servers
    refused = _preflight(f"{s3}/{_bucket(s3)}", CONSOLE, headers=f"content-type, {header}")

    assert refused.status_code == 403


def test_with_the_default_parameters_no_origin_may_upload_from_a_browser(
    servers: tuple[str, str, list[str]],
) -> None:
    s3, _, _ = servers
    refused = _preflight(f"{s3}/{_bucket(s3, origins=None)}", CONSOLE)

    assert refused.status_code == 403
    assert "CORS is not enabled for this bucket" in refused.text


def test_the_answer_to_the_consoles_post_is_readable_by_the_console_only(
    servers: tuple[str, str, list[str]],
) -> None:
    s3, moto, _ = servers
    name = f"cors-{uuid.uuid4().hex[:12]}"
    dynamodb, s3_client = client_of("dynamodb", moto), client_of("s3", s3)
    create_table(dynamodb, name)
    create_bucket(s3_client, name, parameters={"CorsAllowOrigins": CONSOLE})
    repo = AwsRepository(name, name, dynamodb_client=dynamodb, s3_client=s3_client)
    png = files.image("PNG", (10, 10))
    answers = {}
    with repo.open("s1") as storage:
        store = AttachmentStore(storage)
        for origin in (CONSOLE, ELSEWHERE):
            record = store.create(
                name="shot.png", media_type="image/png", size=len(png), sha256=files.sha256(png)
            )
            form = store.upload_form(record)
            assert form is not None
            answers[origin] = httpx.post(
                form.url,
                data=form.fields,
                files={"file": ("shot.png", png, "image/png")},
                headers={"Origin": origin},
                timeout=30,
            )

    assert answers[CONSOLE].status_code == 204, answers[CONSOLE].text
    assert answers[CONSOLE].headers["access-control-allow-origin"] == CONSOLE
    # A browser sends this simple POST without a preflight; the form is the credential, and
    # the page of another origin only never learns the answer.
    assert "access-control-allow-origin" not in answers[ELSEWHERE].headers
