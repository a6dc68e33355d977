"""A stand-in for ACME's issue tracker and CI: in-memory data, so the example runs offline.

A real agent calls its services here (an HTTP client, boto3...). The functions are plain Python:
the tools in `agent.py` wrap them, and tests can call them directly.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

TICKETS: dict[str, dict[str, Any]] = {
    "REL-101": {
        "title": "Checkout times out for carts over 50 items",
        "status": "done",
        "fix_version": "2.4.0",
        "labels": ["bug", "checkout"],
    },
    "REL-102": {
        "title": "Add Apple Pay to the mobile checkout",
        "status": "done",
        "fix_version": "2.4.0",
        "labels": ["feature", "payments"],
    },
    "REL-103": {
        "title": "Migrate the order service to Postgres 16",
        "status": "in_progress",
        "fix_version": "2.5.0",
        "labels": ["chore", "database"],
    },
}

PIPELINES: dict[str, list[dict[str, Any]]] = {
    "main": [
        {"run": 8812, "commit": "9f3c2e1", "status": "passed", "duration_s": 612},
        {"run": 8811, "commit": "41b7aa0", "status": "failed", "duration_s": 433},
        {"run": 8810, "commit": "c0de7f2", "status": "passed", "duration_s": 598},
    ],
    "release/2.4": [
        {"run": 8809, "commit": "77e1d03", "status": "passed", "duration_s": 640},
    ],
}


def release_log_path() -> Path:
    """Where published notes are appended (RELEASE_ASSISTANT_LOG, else a temp-dir file)."""
    configured = os.environ.get("RELEASE_ASSISTANT_LOG")
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / "release_assistant" / "published.jsonl"


def append_release(version: str, channel: str, notes: str) -> int:
    """Append one published release to the log; returns how many releases it holds."""
    path = release_log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"version": version, "channel": channel, "notes": notes, "at": int(time.time())}
    with path.open("a", encoding="utf-8") as log:
        log.write(json.dumps(record) + "\n")
    with path.open(encoding="utf-8") as log:
        return sum(1 for _ in log)
