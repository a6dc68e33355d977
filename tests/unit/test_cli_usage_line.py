"""The usage figure of the chat's status line: measured, cached and estimated counts."""

from __future__ import annotations

from turnkeep.cli.remote import status_line
from turnkeep.cli.usage_line import usage_text


def test_measured_usage_reads_as_plain_counts() -> None:
    assert usage_text(120, 30, 0, estimated=False) == "120 in / 30 out tokens"


def test_cache_reads_are_shown_beside_the_counts() -> None:
    assert usage_text(12, 3, 1800, estimated=False) == "12 in / 3 out tokens, 1800 cached"


def test_estimated_usage_is_marked_so_it_is_never_read_as_a_measurement() -> None:
    assert usage_text(250, 9, 0, estimated=True) == "~250 in / ~9 out tokens (estimated)"


def test_the_remote_status_line_reads_the_estimated_flag_of_the_api_usage() -> None:
    view = {
        "status": "completed",
        "rounds": 2,
        "usage": {"input_tokens": 250, "output_tokens": 9, "estimated": True},
    }

    assert status_line("t1", view) == (
        "[turn t1: completed, 2 model rounds, ~250 in / ~9 out tokens (estimated)]"
    )
