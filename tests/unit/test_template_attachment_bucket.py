"""The bucket's rules for attachments (docs/attachments.md): its CORS rule lets the console's
pages POST an attachment straight to the presigned S3 form and nothing more ("Upload from a
browser": POST only, the origins of `CorsAllowOrigins`, none by default, no header but
Content-Type, and no reference from the bucket to the API: the functions name the bucket and
the API the functions, a cycle); its lifecycle rule expires uploads still tagged pending under
the prefix ("Expired uploads"), a tag the functions may set and remove."""

from __future__ import annotations

import json

from tests.support.aws_template import bucket_cors_rules, load_template
from tools.sam_local.template import render

CONSOLE = "http://127.0.0.1:8787"


def _bucket(parameters: dict[str, str] | None = None) -> dict[str, object]:
    resources = render(load_template(), parameters)["Resources"]
    props: dict[str, object] = resources["ProgressBucket"]["Properties"]
    return props


def test_by_default_the_bucket_allows_no_browser_origin() -> None:
    assert "CorsConfiguration" not in _bucket()
    assert bucket_cors_rules() == []


def test_the_bucket_allows_the_console_origins_to_post_and_nothing_else() -> None:
    origins = f"{CONSOLE},https://console.example.com"

    rules = bucket_cors_rules(parameters={"CorsAllowOrigins": origins})

    assert rules == [
        {
            "ID": "console-attachment-upload",
            "AllowedMethods": ["POST"],
            "AllowedOrigins": [CONSOLE, "https://console.example.com"],
            "AllowedHeaders": ["content-type"],
            "MaxAgeSeconds": 600,
        }
    ]


def test_the_bucket_rule_takes_its_origins_from_the_parameter_not_from_a_resource() -> None:
    cors = _bucket({"CorsAllowOrigins": CONSOLE})["CorsConfiguration"]
    text = json.dumps(cors)

    assert '"Ref": "CorsAllowOrigins"' in text
    resources = load_template()["Resources"]
    named = [r for r in resources if f'"{r}' in text or f"${{{r}" in text]
    assert named == []


def test_the_origins_parameter_takes_origins_only_no_wildcard_or_path() -> None:
    import re

    pattern = load_template()["Parameters"]["CorsAllowOrigins"]["AllowedPattern"]
    for good in ("", CONSOLE, f"{CONSOLE},https://a.example.com"):
        assert re.fullmatch(pattern, good), good
    for bad in ("*", "https://*.example.com", f"{CONSOLE}/console", "null"):
        assert re.fullmatch(pattern, bad) is None, bad


def test_the_lifecycle_rule_expires_only_uploads_still_tagged_pending_under_the_prefix() -> None:
    from turnkeep.storage.aws.blobs import PENDING_TAG

    rules = _bucket()["LifecycleConfiguration"]["Rules"]  # type: ignore[index]
    (rule,) = [r for r in rules if r["Id"] == "expire-unchecked-uploads"]

    assert rule == {
        "Id": "expire-unchecked-uploads",
        "Status": "Enabled",
        "Prefix": {"Fn::Sub": "${StoragePrefix}/"},
        "TagFilters": [{"Key": PENDING_TAG[0], "Value": PENDING_TAG[1]}],
        "ExpirationInDays": 1,
    }


def test_the_functions_may_set_and_remove_the_pending_tag_under_the_prefix_only() -> None:
    policy = load_template()["Resources"]["SessionDataPolicy"]["Properties"]["PolicyDocument"]
    (objects,) = [s for s in policy["Statement"] if s["Sid"] == "ProgressObjects"]

    assert {"s3:PutObjectTagging", "s3:DeleteObjectTagging"} <= set(objects["Action"])
    assert objects["Resource"] == {"Fn::Sub": "${ProgressBucket.Arn}/${StoragePrefix}/*"}
