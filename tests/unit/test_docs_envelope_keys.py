"""docs/envelope.md's key table names every reserved meta key the envelope accepts, with its
owner, so a host reading it learns every key the API's errors can list."""

from __future__ import annotations

import re
from pathlib import Path

from turnkeep.envelope.keys import HOST_META_KEYS, WORKER_META_KEYS

DOC = Path(__file__).resolve().parents[2] / "docs" / "envelope.md"


def _table_rows() -> dict[str, str]:
    rows: dict[str, str] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[1] in ("host", "worker", "worker (notes tools only)"):
            for key in re.findall(r"`(\w+)`", cells[0]):
                rows[key] = cells[1].split()[0]
    return rows


def test_every_reserved_key_is_in_the_table_with_its_owner() -> None:
    rows = _table_rows()

    assert {k: rows.get(k) for k in HOST_META_KEYS} == dict.fromkeys(HOST_META_KEYS, "host")
    assert {k: rows.get(k) for k in WORKER_META_KEYS} == dict.fromkeys(WORKER_META_KEYS, "worker")
