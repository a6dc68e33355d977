"""Secret detection in working notes: ordinary notes pass, obvious secrets are caught."""

from __future__ import annotations

import pytest

from turnkeep.notes import find_secret

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
