"""A stand-in for S3's browser-based POST upload that enforces the POST policy, in front of a
moto server (moto stores a POSTed object without checking its policy).

What it enforces, as S3 does (AWS S3 API reference, "Browser-Based Uploads Using POST" and
"Creating a POST Policy"): the policy is base64 JSON with an `expiration` in the future; the
SigV4 signature `x-amz-signature` is the HMAC of the base64 policy under the signing key of the
credential in `x-amz-credential`; every condition holds (`{"field": value}` and `["eq", ...]`
exact, `["starts-with", ...]` prefix, `["content-length-range", min, max]` on the file's size);
every form field except `x-amz-signature`, `file`, `policy` and `x-ignore-*` is named by a
condition; the object is stored with the form's `tagging`. A refusal is S3's XML error (403
AccessDenied, 400 EntityTooLarge/EntityTooSmall) and stores nothing.

It also decides CORS as S3 does from the bucket's CORS rules (read from moto;
tests/support/s3_cors.py): a preflight (`OPTIONS`) is answered or refused, and an answer to a
browser's request carries the CORS headers only when a rule allows its origin and method. Any
other request is passed to moto unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode
from xml.etree import ElementTree

import boto3
import httpx
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from tests.support import s3_cors

REGION = "us-east-1"
SECRET = "test"
_EXEMPT = {"x-amz-signature", "file", "policy"}


class PolicyRefused(Exception):
    """S3 would refuse the POST: `status`, S3 error `code`, message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = hmac.new(f"AWS4{secret}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _check_signature(fields: dict[str, str]) -> None:
    credential = fields.get("x-amz-credential", "")
    parts = credential.split("/")
    if len(parts) != 5 or fields.get("x-amz-algorithm") != "AWS4-HMAC-SHA256":
        raise PolicyRefused(403, "AccessDenied", "missing or malformed SigV4 credential")
    key = _signing_key(SECRET, parts[1], parts[2], parts[3])
    expected = hmac.new(key, fields["policy"].encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, fields.get("x-amz-signature", "")):
        raise PolicyRefused(403, "SignatureDoesNotMatch", "the policy signature does not match")


def _check_condition(condition: Any, fields: dict[str, str], size: int) -> set[str]:
    """Check one condition; the form fields it names."""
    if isinstance(condition, dict):
        [(name, wanted)] = condition.items()
        if fields.get(name.lower()) != wanted:
            raise PolicyRefused(403, "AccessDenied", f"Policy Condition failed: {name} = {wanted}")
        return {name.lower()}
    op = condition[0].lower()
    if op == "content-length-range":
        low, high = int(condition[1]), int(condition[2])
        if size > high:
            raise PolicyRefused(400, "EntityTooLarge", f"{size} bytes is above {high}")
        if size < low:
            raise PolicyRefused(400, "EntityTooSmall", f"{size} bytes is below {low}")
        return set()
    name = condition[1].lstrip("$").lower()
    value = fields.get(name, "")
    holds = value == condition[2] if op == "eq" else value.startswith(condition[2])
    if not holds:
        raise PolicyRefused(403, "AccessDenied", f"Policy Condition failed: {condition}")
    return {name}


def check_post(bucket: str, fields: dict[str, str], size: int) -> None:
    """PolicyRefused unless S3 would take this POST of `size` bytes into `bucket`."""
    if "policy" not in fields:
        raise PolicyRefused(403, "AccessDenied", "no policy")
    _check_signature(fields)
    policy = json.loads(base64.b64decode(fields["policy"]))
    expiration = datetime.fromisoformat(policy["expiration"].replace("Z", "+00:00"))
    if expiration <= datetime.now(UTC):
        raise PolicyRefused(403, "AccessDenied", "Invalid according to Policy: Policy expired")
    named: set[str] = set()
    for condition in policy.get("conditions", []):
        named |= _check_condition(condition, {**fields, "bucket": bucket}, size)
    unnamed = {f for f in fields if f not in _EXEMPT | named and not f.startswith("x-ignore-")} - {
        "bucket"
    }
    if unnamed:
        raise PolicyRefused(
            403, "AccessDenied", f"Invalid according to Policy: Extra input fields: {unnamed}"
        )


def _form(content_type: str, body: bytes) -> tuple[dict[str, str], bytes | None]:
    message = BytesParser(policy=HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields: dict[str, str] = {}
    data: bytes | None = None
    for part in message.iter_parts():  # type: ignore[attr-defined]
        name = str(part.get_param("name", header="content-disposition")).lower()
        payload = part.get_payload(decode=True) or b""
        if name == "file":
            data = payload
        else:
            fields[name] = payload.decode()
    return fields, data


def _tagging(xml: str) -> str:
    """The form's `tagging` field (S3's Tagging XML) as PutObject's URL-encoded `Tagging`."""
    if not xml:
        return ""
    tags = ElementTree.fromstring(xml).iter("Tag")
    return urlencode([(t.findtext("Key", ""), t.findtext("Value", "")) for t in tags])


class _Handler(BaseHTTPRequestHandler):
    server: _StandIn

    def log_message(self, *args: object) -> None:
        del args

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self) -> None:
        body = self._body()
        answer = httpx.request(
            self.command,
            self.server.moto + self.path,
            headers={k: v for k, v in self.headers.items() if k.lower() != "host"},
            content=body,
            timeout=30,
        )
        # moto's server adds blanket CORS headers to every answer (any origin, any method):
        # dropped, and S3's own for this request's origin and method added.
        kept = {
            k: v
            for k, v in answer.headers.items()
            if not k.lower().startswith("access-control-") and k.lower() != "vary"
        }
        origin = self.headers.get("Origin")
        rules = self._cors_rules(self._bucket()) if origin else None
        cors = s3_cors.response_headers(rules, origin, self.command)
        self._answer(answer.status_code, answer.content, {**kept, **cors})

    do_GET = do_PUT = do_DELETE = do_HEAD = _forward

    def _bucket(self) -> str:
        return self.path.strip("/").split("/", 1)[0].split("?", 1)[0]

    def _cors_rules(self, bucket: str) -> list[dict[str, Any]] | None:
        if not bucket:  # not a bucket's URL (moto also serves DynamoDB here)
            return None
        try:
            rules: list[dict[str, Any]] = self.server.client.get_bucket_cors(Bucket=bucket)[
                "CORSRules"
            ]
        except ClientError:  # NoSuchCORSConfiguration (or no such bucket): no rule allows it
            return None
        return rules

    def do_OPTIONS(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            allowed = s3_cors.preflight(self._cors_rules(self._bucket()), headers)
        except s3_cors.CorsRefused as exc:
            self.server.refusals.append("CORSResponse")
            xml = f"<Error><Code>AccessForbidden</Code><Message>{exc}</Message></Error>".encode()
            self._answer(exc.status, xml, {"Content-Type": "application/xml"})
            return
        self._answer(200, b"", allowed)

    def do_POST(self) -> None:
        content_type = self.headers.get("Content-Type", "")
        if not content_type.startswith("multipart/form-data"):
            self._forward()
            return
        bucket = self._bucket()
        cors = s3_cors.response_headers(
            self._cors_rules(bucket), self.headers.get("Origin"), "POST"
        )
        fields, data = _form(content_type, self._body())
        try:
            if data is None:
                raise PolicyRefused(400, "InvalidArgument", "no file field")
            check_post(bucket, fields, len(data))
        except PolicyRefused as exc:
            self.server.refusals.append(exc.code)
            xml = f"<Error><Code>{exc.code}</Code><Message>{exc}</Message></Error>".encode()
            self._answer(exc.status, xml, {"Content-Type": "application/xml", **cors})
            return
        self.server.client.put_object(
            Bucket=bucket,
            Key=fields["key"],
            Body=data,
            ContentType=fields.get("content-type", ""),
            Tagging=_tagging(fields.get("tagging", "")),
        )
        self._answer(204, b"", cors)


class _StandIn(ThreadingHTTPServer):
    moto: str
    client: Any
    refusals: list[str]


@contextmanager
def policy_enforcing_s3() -> Iterator[tuple[str, str, list[str]]]:
    """(stand-in endpoint, moto endpoint, refusal codes): S3 at the stand-in, moto behind it."""
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    moto_url = f"http://{host}:{port}"
    server = _StandIn(("127.0.0.1", 0), _Handler)
    server.moto = moto_url
    server.refusals = []
    server.client = boto3.client(
        "s3",
        region_name=REGION,
        endpoint_url=moto_url,
        aws_access_key_id="test",
        aws_secret_access_key=SECRET,
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", moto_url, server.refusals
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        moto.stop()


def client_of(service: str, endpoint: str) -> Any:
    """A boto3 client of `service` at `endpoint` (moto or the stand-in), test credentials."""
    return boto3.client(
        service,
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
