"""Obvious-secret detection for working notes (notes are folded into every later prompt).

A small, documented set of high-precision patterns; each names a kind of secret. The goal is
to stop the obvious leak (a pasted key or token), not to be a full scanner: prose that merely
talks about keys ("rotate the bearer token", "Bearer token-refresh-flow-v2") and paths that
contain a key-like prefix (`/data/sk-2024-runs/`) do not match.

| kind                         | pattern                                                       |
| ---------------------------- | ------------------------------------------------------------- |
| AWS access key id            | `AKIA`/`ASIA` + 16 upper-case letters or digits               |
| AWS secret access key        | `aws_secret_access_key`/`SecretAccessKey` `=`/`:` + 40 chars  |
| private key block            | `-----BEGIN [ALGO ]PRIVATE KEY-----` (PEM, OpenSSH, PGP)      |
| bearer token                 | `Bearer` (any case) + a random-looking token (see below)      |
| GitHub token                 | `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` + 36 chars, `github_pat_…` |
| OpenAI-style API key         | `sk-` + a random-looking token, not a path component          |
| Stripe secret key            | `sk_live_`/`rk_live_`/`sk_test_` + 24+ letters or digits      |
| Slack token                  | `xoxb-`/`xoxp-`/`xoxa-`/`xoxr-`/`xoxs-` + digits and dashes   |
| JSON Web Token               | three base64url segments, the first two starting `eyJ`        |

"Random-looking": the token holds a run of 16+ letters and digits that mixes both, as
generated keys do and hyphenated words do not. Every pattern is a plain linear scan (no
lookahead over the rest of the text), so a full 32 KiB block is checked in milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

_RANDOM_RUN: Final = re.compile(r"[A-Za-z0-9]{16,}")


def _random_looking(token: str) -> bool:
    """Whether `token` holds a 16+ run of ASCII letters and digits that mixes both."""
    return any(
        any(c.isdigit() for c in run) and any(c.isalpha() for c in run)
        for run in _RANDOM_RUN.findall(token)
    )


def _any(_: re.Match[str]) -> bool:
    return True


def _random_token(match: re.Match[str]) -> bool:
    return _random_looking(match.group("token"))


def _random_token_not_in_a_path(match: re.Match[str]) -> bool:
    text, start, end = match.string, match.start(), match.end()
    in_path = (start > 0 and text[start - 1] in "/\\") or (end < len(text) and text[end] in "/\\")
    return not in_path and _random_looking(match.group("token"))


_PATTERNS: Final[tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool]], ...]] = (
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), _any),
    (
        "an AWS secret access key",
        # The key is exactly 40 base64 characters and may end in "/" or "+".
        re.compile(
            r"(?i)(?:aws_?)?secret_?access_?key[\"']?\s*[=:]\s*[\"']?[A-Za-z0-9/+]{40}"
            r"(?![A-Za-z0-9/+])"
        ),
        _any,
    ),
    (
        "a private key block",
        re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
        _any,
    ),
    (
        "a bearer token",
        re.compile(r"(?i:\bbearer)\s+(?P<token>[A-Za-z0-9\-._~+/]{20,})"),
        _random_token,
    ),
    (
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"),
        _any,
    ),
    (
        "an OpenAI-style API key",
        re.compile(r"\bsk-(?P<token>[A-Za-z0-9_\-]{20,})"),
        _random_token_not_in_a_path,
    ),
    ("a Stripe secret key", re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{24,}"), _any),
    ("a Slack token", re.compile(r"\bxox[abprs]-[0-9A-Za-z]{6,}-[0-9A-Za-z\-]{6,}"), _any),
    (
        "a JSON Web Token",
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
        _any,
    ),
)

SECRET_KINDS: Final = tuple(kind for kind, _, _ in _PATTERNS)


def find_secret(text: str) -> str | None:
    """The kind of the first obvious secret in `text` (e.g. "an AWS access key id"), or None.

    Only the kind is returned, never the matched text, so callers cannot echo a secret.
    """
    for kind, pattern, accept in _PATTERNS:
        if any(accept(match) for match in pattern.finditer(text)):
            return kind
    return None
