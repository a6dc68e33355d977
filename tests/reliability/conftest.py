"""Reliability suite: crash points, duplicate deliveries, cleanup races, a real server killed.

Every test here carries the `reliability` marker. By default (CI, `make test`) the crash matrix
runs on SQLite only; `TURNKEEP_RELIABILITY=full` (what `make reliability` sets) runs it on
SQLite, JSONL and AWS (moto).
"""

from __future__ import annotations

import os

import pytest

FULL = os.environ.get("TURNKEEP_RELIABILITY", "") == "full"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this folder `reliability`."""
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.reliability)
