"""Obvious-secret detection for working notes (notes are folded into every later prompt).

A documented set of high-precision patterns; each names a kind of secret. The goal is to stop
the obvious leak (a pasted key, token or password), not to be a full scanner: prose that merely
talks about keys ("rotate the bearer token", "Bearer token-refresh-flow-v2", "the password must
be 12+ characters") and paths that contain a key-like prefix (`/data/sk-2024-runs/`) do not
match. The false-positive rate is measured on a corpus of 1,000+ ordinary notes lines
(`tests/data/notes_corpus.txt`, `bench/secret_patterns_bench.py`): 0 there.

The text is normalised before matching (`normalize_for_scan`): NFKC (full-width and other
compatibility forms become ASCII) and invisible characters removed (zero-width spaces and
joiners, word joiner, BOM, soft hyphen, bidi controls, other format and control characters,
Hangul and braille fillers), so a key split by a zero-width space is still one key.

| kind                  | pattern                                                              |
| --------------------- | -------------------------------------------------------------------- |
| AWS access key id     | `AKIA`/`ASIA`/`AGPA`/`AIDA`/`AROA`/`AIPA`/`ANPA`/`ANVA`/`ABIA`/`ACCA` |
|                       | + 16 upper-case letters or digits                                    |
| AWS secret access key | `aws_secret_access_key`/`SecretAccessKey` `=`/`:` + 40 chars         |
| Google API key        | `AIza` + 35 letters, digits, `_` or `-`                              |
| private key block     | `-----BEGIN [ALGO ]PRIVATE KEY-----` (PEM, OpenSSH, PGP)             |
| bearer token          | `Bearer` (any case) + a random-looking token (see below)             |
| GitHub token          | `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` + 36 chars, `github_pat_…`        |
| OpenAI-style API key  | `sk-` (also `sk-proj-`, Anthropic `sk-ant-…`) + a random-looking     |
|                       | token, not a path component                                          |
| Stripe secret key     | `sk_live_`/`rk_live_`/`sk_test_`/`whsec_` + 24+ letters or digits    |
| Slack token           | `xoxb-`/`xoxp-`/`xoxa-`/`xoxr-`/`xoxs-` + ids                        |
| Slack webhook URL     | `hooks.slack.com/services/T…/B…/…`                                   |
| JSON Web Token        | three base64url segments, the first two starting `eyJ`               |
| password assignment   | `password`/`passwd`/`passphrase`/`secret`/`api_key`/`access_token`/  |
|                       | `auth_token`/`client_secret` `:`/`=` + a credential-looking value    |

"Random-looking": the token holds a run of 16+ letters and digits that mixes both, as
generated keys do and hyphenated words do not. A "credential-looking" assigned value is 6+
characters with a digit or a symbol, not lower-case hyphenated words and numbers
(`minimum-12-chars`), not a placeholder (`<…>`, `${…}`, `{{…}}`, `%(…)s`,
`***`, `xxx…`), not code (`get_secret("db")`, `os.environ[…]`), not a path. Every pattern is a
plain linear scan (no lookahead over the rest of the text), so a full 32 KiB block is checked
in milliseconds.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Final

_RANDOM_RUN: Final = re.compile(r"[A-Za-z0-9]{16,}")

# Invisible characters: every format character (Unicode category Cf: zero-width space and
# joiners, word joiner, BOM, soft hyphen, bidi controls, tag characters, ...), the control
# characters but newline and tab, and the fillers that render as blank (Hangul, braille).
# A test checks the Cf ranges against this Python's Unicode database.
_INVISIBLE: Final = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f"
    "\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
    "\u115f\u1160\u3164\uffa0\u2800]"
)


def normalize_for_scan(text: str) -> str:
    """`text` as matched: NFKC, with invisible (format, control, filler) characters removed."""
    folded = unicodedata.normalize("NFKC", text)
    return _INVISIBLE.sub("", folded)


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


_PLACEHOLDER: Final = re.compile(
    r"^(?:<.*>|\$\{.*\}|\$[A-Z_][A-Z0-9_]*|\{\{.*\}\}|%\(.*\)s|\*+|x{3,}|\.{3,}|…)$", re.IGNORECASE
)
_CODE_OR_PATH: Final = re.compile(r"[(\[{]|^(?:[~/.]|[A-Za-z]:\\|https?:)")
_SYMBOLS: Final = frozenset("!@#$%^&*+=?~|;:,<>")
_WORDS: Final = re.compile(r"^(?:[A-Za-z]+|[0-9]+\+?)(?:[-_](?:[A-Za-z]+|[0-9]+\+?))*$")


def _credential_value(match: re.Match[str]) -> bool:
    """Whether the assigned value looks like a credential, not prose, code or a placeholder."""
    value = match.group("value").strip("\"'`").rstrip(".,;)")
    if len(value) < 6 or _PLACEHOLDER.match(value) or _CODE_OR_PATH.search(value):
        return False
    if _WORDS.match(value) and not any(c.isupper() for c in value[1:]):
        return False  # "minimum-12-characters": lower-case words and numbers, not a credential
    return any(c.isdigit() for c in value) or any(c in _SYMBOLS for c in value)


_PATTERNS: Final[tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool]], ...]] = (
    (
        "an AWS access key id",
        re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}\b"),
        _any,
    ),
    (
        "an AWS secret access key",
        # The key is exactly 40 base64 characters and may end in "/" or "+".
        re.compile(
            r"(?i)(?:aws_?)?secret_?access_?key[\"']?\s*[=:]\s*[\"']?[A-Za-z0-9/+]{40}"
            r"(?![A-Za-z0-9/+])"
        ),
        _any,
    ),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), _any),
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
    (
        "a Stripe secret key",
        re.compile(r"\b(?:[sr]k_(?:live|test)_[A-Za-z0-9]{24,}|whsec_[A-Za-z0-9]{24,})"),
        _any,
    ),
    ("a Slack token", re.compile(r"\bxox[abprs]-[0-9A-Za-z]{6,}-[0-9A-Za-z\-]{6,}"), _any),
    (
        "a Slack webhook URL",
        re.compile(r"hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,}"),
        _any,
    ),
    (
        "a JSON Web Token",
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
        _any,
    ),
    (
        "a password assignment",
        re.compile(
            r"(?i)(?<![a-z0-9])(?:password|passwd|passphrase|secret|api[_-]?key|access[_-]?token"
            r"|auth[_-]?token|client[_-]?secret)[\"']?\s*[:=]\s*(?P<value>[^\s]+)"
        ),
        _credential_value,
    ),
)

SECRET_KINDS: Final = tuple(kind for kind, _, _ in _PATTERNS)


def find_secret(text: str) -> str | None:
    """The kind of the first obvious secret in `text` (e.g. "an AWS access key id"), or None.

    Matched after `normalize_for_scan`. Only the kind is returned, never the matched text, so
    callers cannot echo a secret.
    """
    scanned = normalize_for_scan(text)
    for kind, pattern, accept in _PATTERNS:
        if any(accept(match) for match in pattern.finditer(scanned)):
            return kind
    return None
