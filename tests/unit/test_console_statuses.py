"""The console's active-status set is one module, `js/statuses.js`, equal to Python's
`ACTIVE_STATUSES`, and no other console module writes the set again."""

from __future__ import annotations

import re
from pathlib import Path

from turnkeep.turn_rules import ACTIVE_STATUSES

JS = Path(__file__).resolve().parents[2] / "shared/turnkeep/api/console/static/js"
_SET = re.compile(r"export const ACTIVE_STATUSES = new Set\(\[(?P<items>[^\]]*)\]\);")
_STATUS = re.compile(r'"([a-z_]+)"')


def _declared(text: str) -> set[str] | None:
    found = _SET.search(text)
    return set(_STATUS.findall(found["items"])) if found else None


def _copies(directory: Path) -> list[str]:
    """Console modules other than statuses.js that list the active statuses themselves."""
    literal = re.compile(r'"(running|cancelling|awaiting_approval)",\s*"')
    return sorted(
        p.name
        for p in directory.glob("*.js")
        if p.name != "statuses.js" and literal.search(p.read_text("utf-8"))
    )


def test_the_consoles_active_statuses_equal_pythons() -> None:
    assert _declared((JS / "statuses.js").read_text("utf-8")) == set(ACTIVE_STATUSES)


def test_no_other_console_module_lists_the_active_statuses() -> None:
    assert _copies(JS) == []


def test_the_checks_fail_for_a_drifted_set_or_a_copy(tmp_path: Path) -> None:
    drifted = 'export const ACTIVE_STATUSES = new Set(["running", "cancelling"]);'
    (tmp_path / "turnview.js").write_text('const live = ["running", "cancelling"].includes(s);')

    assert _declared(drifted) != set(ACTIVE_STATUSES)
    assert _copies(tmp_path) == ["turnview.js"]
