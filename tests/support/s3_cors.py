"""S3's evaluation of a bucket's CORS rules, for the S3 stand-in (tests/support/s3_post_policy.py).

moto's server answers a preflight by the Origin alone (any method and header pass, and a bucket
without CORS rules answers 200), so the stand-in decides CORS itself, as the S3 user guide,
"How does Amazon S3 evaluate the CORS configuration on a bucket?", describes it: the first
rule whose `AllowedOrigins` match the `Origin` (one `*` wildcard each), whose `AllowedMethods`
hold the method (`Access-Control-Request-Method` in a preflight) and whose `AllowedHeaders`
match every header of `Access-Control-Request-Headers` (case-insensitive, `*` wildcards)
applies; a preflight no rule matches is 403, a bucket without a CORS configuration answers
every preflight 403, and a preflight without an Origin is 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_VARY = "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"


class CorsRefused(Exception):
    """S3 would refuse the preflight: `status` and S3's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _wildcard(pattern: str, value: str) -> bool:
    regex = ".*".join(re.escape(part) for part in pattern.lower().split("*"))
    return re.fullmatch(regex, value.lower()) is not None


def matching_rule(
    rules: Sequence[Mapping[str, Any]], origin: str, method: str, headers: Sequence[str] = ()
) -> Mapping[str, Any] | None:
    """The first rule that allows `method` with `headers` from `origin`, or None."""
    for rule in rules:
        if not any(_wildcard(allowed, origin) for allowed in rule.get("AllowedOrigins", [])):
            continue
        if method not in rule.get("AllowedMethods", []):
            continue
        allowed_headers = rule.get("AllowedHeaders", [])
        if all(any(_wildcard(a, h) for a in allowed_headers) for h in headers):
            return rule
    return None


def _allow_origin(rule: Mapping[str, Any], origin: str) -> str:
    return "*" if "*" in rule.get("AllowedOrigins", []) else origin


def preflight(
    rules: Sequence[Mapping[str, Any]] | None, request: Mapping[str, str]
) -> dict[str, str]:
    """The headers of S3's 200 answer to the preflight with `request` headers (lower-case
    names); CorsRefused when S3 refuses it."""
    origin = request.get("origin")
    method = request.get("access-control-request-method")
    if not origin or not method:
        raise CorsRefused(400, "Insufficient information. Origin request header needed.")
    if not rules:
        raise CorsRefused(403, "CORSResponse: CORS is not enabled for this bucket.")
    wanted = [h.strip() for h in request.get("access-control-request-headers", "").split(",")]
    wanted = [h for h in wanted if h]
    rule = matching_rule(rules, origin, method, wanted)
    if rule is None:
        raise CorsRefused(
            403,
            "CORSResponse: This CORS request is not allowed. This is usually because the "
            "evalution of Origin, request method / Access-Control-Request-Method or "
            "Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.",
        )
    answer = {
        "Access-Control-Allow-Origin": _allow_origin(rule, origin),
        "Access-Control-Allow-Methods": ", ".join(rule["AllowedMethods"]),
        "Vary": _VARY,
    }
    if wanted:
        answer["Access-Control-Allow-Headers"] = ", ".join(wanted)
    if "MaxAgeSeconds" in rule:
        answer["Access-Control-Max-Age"] = str(rule["MaxAgeSeconds"])
    if rule.get("ExposeHeaders"):
        answer["Access-Control-Expose-Headers"] = ", ".join(rule["ExposeHeaders"])
    return answer


def response_headers(
    rules: Sequence[Mapping[str, Any]] | None, origin: str | None, method: str
) -> dict[str, str]:
    """The CORS headers S3 adds to its answer to an actual `method` request from `origin`
    (none when no rule allows it: the browser then withholds the answer from the page)."""
    rule = matching_rule(rules or [], origin, method) if origin else None
    if rule is None:
        return {}
    answer = {"Access-Control-Allow-Origin": _allow_origin(rule, str(origin)), "Vary": _VARY}
    answer["Access-Control-Allow-Methods"] = ", ".join(rule["AllowedMethods"])
    if rule.get("ExposeHeaders"):
        answer["Access-Control-Expose-Headers"] = ", ".join(rule["ExposeHeaders"])
    return answer
