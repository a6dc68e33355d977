"""Obvious-secret detection for working notes (notes are folded into every later prompt).

A small, documented set of high-precision patterns; each names a kind of secret. The goal is
to stop the obvious leak (a pasted key or token), not to be a full scanner: prose that merely
talks about keys ("rotate the bearer token") does not match.

| kind                         | pattern                                                       |
| ---------------------------- | ------------------------------------------------------------- |
| AWS access key id            | `AKIA`/`ASIA` + 16 upper-case letters or digits               |
| AWS secret access key        | `aws_secret_access_key` `=`/`:` followed by 40 base64 chars   |
| private key block            | `-----BEGIN [ALGO ]PRIVATE KEY-----` (PEM, OpenSSH, PGP)      |
| bearer token                 | `Bearer ` + a 20+ character token containing a digit          |
| GitHub token                 | `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` + 36 chars, `github_pat_…` |
| OpenAI-style API key         | `sk-` (optionally `proj-`) + 20+ chars, at least one digit    |
| Stripe secret key            | `sk_live_`/`rk_live_`/`sk_test_` + 16+ chars                  |
| Slack token                  | `xoxb-`/`xoxp-`/`xoxa-`/`xoxr-`/`xoxs-` + digits and dashes   |
| JSON Web Token               | three base64url segments, the first two starting `eyJ`        |
"""

from __future__ import annotations

import re
from typing import Final

_PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    (
        "an AWS secret access key",
        re.compile(r"(?i)aws_secret_access_key\s*[=:]\s*[\"']?[A-Za-z0-9/+]{40}\b"),
    ),
    (
        "a private key block",
        re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ),
    # Tokens carry digits; requiring one keeps prose ("Bearer authorisation-header-style")
    # from matching.
    (
        "a bearer token",
        re.compile(r"\b[Bb]earer\s+(?=[A-Za-z0-9\-._~+/]*\d)[A-Za-z0-9\-._~+/]{20,}=*"),
    ),
    (
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"),
    ),
    (
        "an OpenAI-style API key",
        re.compile(r"\bsk-(?:proj-)?(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{20,}"),
    ),
    ("a Stripe secret key", re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[0-9A-Za-z]{6,}-[0-9A-Za-z\-]{6,}")),
    (
        "a JSON Web Token",
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ),
)

SECRET_KINDS: Final = tuple(kind for kind, _ in _PATTERNS)


def find_secret(text: str) -> str | None:
    """The kind of the first obvious secret in `text` (e.g. "an AWS access key id"), or None.

    Only the kind is returned, never the matched text, so callers cannot echo a secret.
    """
    for kind, pattern in _PATTERNS:
        if pattern.search(text):
            return kind
    return None
