"""Known-secret samples for the working-notes secret check (test and bench share them).

Built by concatenation and made of fake values, so no scanner mistakes this file for a leak.
Each is (expected kind, note text). Includes the three of issue #9: a Google API key, an AWS key
id split by a zero-width space, and a `db password: …` line.
"""

from __future__ import annotations

ZWSP, ZWJ, WJ, SHY, BOM, RLO = "\u200b", "\u200d", "\u2060", "\u00ad", "\ufeff", "\u202e"

_GOOGLE = "AI" + "za" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
_AWS_ID = "AK" + "IA" + "IOSFODNN7" + "QWERTYU"
_GITHUB = "gh" + "p_" + "a1B2c3D4e5F6g7H8i9J0" + "k1L2m3N4o5P6q7R8"
_SLACK = "xo" + "xb-" + "123456789012-" + "1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
_STRIPE = "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc"

SECRET_SAMPLES: list[tuple[str, str]] = [
    # -- issue #9 ------------------------------------------------------------------------------
    ("a Google API key", f"maps key {_GOOGLE} for the demo"),
    ("an AWS access key id", f"id {_AWS_ID[:8]}{ZWSP}{_AWS_ID[8:]} (prod)"),
    ("a password assignment", "db password: hunter2-" + "correct-horse"),
    # -- invisible or compatibility characters inside a key ------------------------------------
    ("an AWS access key id", "".join(chr(ord(c) + 0xFEE0) for c in _AWS_ID[:4]) + _AWS_ID[4:]),
    ("an AWS access key id", f"{_AWS_ID[:5]}{WJ}{_AWS_ID[5:12]}{ZWJ}{_AWS_ID[12:]}"),
    ("an AWS access key id", f"{BOM}{_AWS_ID[:10]}{RLO}{_AWS_ID[10:]}"),
    ("a GitHub token", f"token {_GITHUB[:10]}{SHY}{_GITHUB[10:]}"),
    ("a Google API key", f"{_GOOGLE[:4]}{ZWSP}{_GOOGLE[4:20]}{ZWSP}{_GOOGLE[20:]}"),
    ("a Slack token", f"{_SLACK[:6]}{ZWSP}{_SLACK[6:]}"),
    ("a Stripe secret key", f"{_STRIPE[:8]}{SHY}{_STRIPE[8:]}"),
    # -- provider formats ----------------------------------------------------------------------
    ("an AWS access key id", "temporary creds: AS" + "IAQWERTYUIOP123456"),
    ("an AWS access key id", "role id AR" + "OAXYZ1234567890ABC"),
    (
        "an AWS secret access key",
        "aws_secret_access_key=" + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "9a8b7c6d5e",
    ),
    ("a private key block", "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA"),
    ("a private key block", "-----BEGIN " + "EC PRIVATE KEY-----"),
    ("a private key block", "-----BEGIN " + "PRIVATE KEY-----"),
    ("a bearer token", "Authorization: Bearer " + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"),
    ("a GitHub token", f"GITHUB_TOKEN={_GITHUB}"),
    ("a GitHub token", "gh" + "o_" + "16C7e42F292c6912E7710c838347Ae178B4a"),
    ("a GitHub token", "github" + "_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123"),
    ("an OpenAI-style API key", "OPENAI_API_KEY=" + "sk-" + "proj-" + "Ab3xY9" * 8),
    (
        "an OpenAI-style API key",
        "sk-" + "ant-api03-" + "Zq9xW2vB7nM4kL1pR6tY3uI8oP5aS0dF" + "-_Ab" * 5,
    ),
    ("an OpenAI-style API key", "key: sk-" + "a1B2c3D4e5F6g7H8i9J0" * 2),
    ("a Stripe secret key", f"STRIPE_SECRET_KEY={_STRIPE}"),
    ("a Stripe secret key", "rk" + "_live_" + "51HqLyjWDarjtT1zdp7dcAbCd"),
    ("a Stripe secret key", "webhook signing secret wh" + "sec_" + "1234567890abcdefABCDEF1234"),
    ("a Slack token", _SLACK),
    (
        "a Slack webhook URL",
        "https://hooks.slack.com/services/" + "T0123ABCD/B0456EFGH/" + "abcdEFGH1234ijklMNOP5678",
    ),
    (
        "a JSON Web Token",
        "eyJ"
        + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    ),
    ("a password assignment", 'config: {"password": "S3cr3t!pass"}'),
    ("a password assignment", "DB_PASSWORD=Tr0ub4dor&3"),
    ("a password assignment", "mysql root password = p@ssw0rd-2024"),
    ("a password assignment", "client_secret: 8f2a9c1e7b3d4f60a1b2"),
    ("a password assignment", "passphrase: 'blue-Falcon-77-orbit'"),
    ("a password assignment", "API_KEY = 'a8f5f167f44f4964e6c998dee827110c'"),
    ("a password assignment", "auth_token: 5b1f0e6a2c9d48e7"),
]
