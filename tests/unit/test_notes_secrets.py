"""Secret detection in working notes: ordinary notes pass, obvious secrets are caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.secret_samples import SECRET_SAMPLES
from turnkeep.notes import find_secret
from turnkeep.notes.secrets import normalize_for_scan

AWS_SECRET_ENDING_IN_SYMBOLS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEK+/"


@pytest.mark.parametrize(
    "note",
    [
        "Build outputs live in /data/sk-2024-build-artifacts-folder/out.",
        "Notebook: ~/work/sk-learn-experiments-2024/notebook.ipynb",
        "cd sk-0001-experiment-results-final && ls",
        "Artifacts: s3://team-bucket/sk-a1b2c3d4e5f6g7h8i9j0k1/run.log",
    ],
)
def test_a_path_containing_sk_dash_is_not_mistaken_for_an_api_key(note: str) -> None:
    assert find_secret(note) is None


@pytest.mark.parametrize(
    "note",
    [
        "Endpoint expects Bearer token-refresh-flow-v2-documentation style auth.",
        "The gateway wants bearer credentials-per-tenant-v3-rollout first.",
        "Auth: bearer tokens expire after 3600 seconds; refresh via /oauth2/token.",
    ],
)
def test_the_word_bearer_in_prose_is_not_mistaken_for_a_token(note: str) -> None:
    assert find_secret(note) is None


def test_a_test_name_with_sk_test_prefix_is_not_mistaken_for_a_stripe_key() -> None:
    assert find_secret("Run pytest -k sk_test_integrationsuite1 before merging.") is None


@pytest.mark.parametrize(
    "note",
    [
        f"aws_secret_access_key = {AWS_SECRET_ENDING_IN_SYMBOLS} (rotated monthly)",
        f"AWS_SECRET_ACCESS_KEY={AWS_SECRET_ENDING_IN_SYMBOLS}",
        '"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",',
    ],
)
def test_an_aws_secret_access_key_is_caught_whatever_its_last_character_or_format(
    note: str,
) -> None:
    assert find_secret(note) == "an AWS secret access key"


@pytest.mark.parametrize(
    "header",
    [
        "Authorization: BEARER abcdef0123456789abcdef0123456789",
        "authorization: bearer abcdef0123456789abcdef0123456789",
        "Authorization: Bearer 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ],
)
def test_a_bearer_token_is_caught_whatever_the_case_of_the_scheme(header: str) -> None:
    assert find_secret(header) == "a bearer token"


@pytest.mark.parametrize(
    "key",
    [
        "sk-" + "a1B2c3D4e5F6g7H8i9J0" * 2 + "abcdefgh",
        "sk-abcdefghijklmnopqrstT3BlbkFJabcdefghijklmnop12",
        "sk-proj-" + "Xy7_" * 4 + "AbCdEf0123456789GhIjKl" + "-Qr8" * 10,
        "sk-ant-api03-" + "Zq9xW2vB7nM4kL1pR6tY3uI8oP5aS0dF" + "-_Ab" * 5,
    ],
)
def test_an_sk_dash_api_key_pasted_in_a_note_is_caught(key: str) -> None:
    assert find_secret(f"OPENAI_API_KEY={key}") == "an OpenAI-style API key"
    assert find_secret(f"the key is {key}.") == "an OpenAI-style API key"


@pytest.mark.parametrize(
    "text",
    ["sk-" * 10922, "Bearer " + "sk-" * 10920, "aws_secret_access_key=" * 1489],
)
def test_a_full_cap_block_of_repeated_prefixes_scans_clean(text: str) -> None:
    # Repeated prefixes once made the scan quadratic (seconds per update); it must stay a
    # plain linear scan and still find nothing here.
    assert len(text.encode()) <= 32768
    assert find_secret(text) is None


# -- issue #9: invisible characters, provider formats, a corpus of ordinary notes ---------------

CORPUS = Path(__file__).resolve().parents[1] / "data" / "notes_corpus.txt"


def _corpus() -> list[str]:
    return CORPUS.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(("kind", "note"), SECRET_SAMPLES)
def test_every_known_secret_sample_is_flagged_as_its_kind(kind: str, note: str) -> None:
    assert find_secret(note) == kind


def test_no_line_of_the_ordinary_notes_corpus_is_flagged() -> None:
    lines = _corpus()
    assert len(set(lines)) >= 1000  # prose, code, paths, ids, hashes, UUIDs, URLs, SHAs

    flagged = [(find_secret(line), line) for line in lines if find_secret(line) is not None]

    assert flagged == []


def test_the_whole_corpus_as_one_note_is_not_flagged() -> None:
    assert find_secret("\n".join(_corpus())) is None


def test_normalising_removes_invisible_characters_and_folds_compatibility_forms() -> None:
    text = "A\u200bK\u200dI\u2060A\ufeff\u00ad\u202e \uff21\uff22 \u3164x"

    assert normalize_for_scan(text) == "AKIA AB x"
    assert normalize_for_scan("plain line\twith tab\n") == "plain line\twith tab\n"


@pytest.mark.parametrize(
    "note",
    [
        "password: ${DB_PASSWORD}",
        "api_key: <your key here>",
        "secret: {{ .Values.secret }}",
        "password = get_secret('db')",
        'api_key = os.environ["OPENAI_API_KEY"]',
        "password: minimum-12-characters (policy)",
        "password_hash = argon2.hash(password)",
        "access_token: '***'",
        "secret: /var/run/secrets/token",
    ],
)
def test_placeholders_code_and_policy_text_after_password_are_not_flagged(note: str) -> None:
    assert find_secret(note) is None


def test_every_format_character_of_this_unicode_database_is_removed_before_matching() -> None:
    import sys
    import unicodedata

    format_chars = [
        chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"
    ]

    assert normalize_for_scan("".join(format_chars)) == ""
