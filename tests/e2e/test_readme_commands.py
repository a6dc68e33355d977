"""README.md's command blocks cannot go stale: every block marked `<!-- runnable -->` runs.

Convention (stated in README.md): each fenced `bash`/`sh`/`shell` block is preceded by
`<!-- runnable -->` or `<!-- not-runnable: <why> -->`. Runnable blocks run with
`bash -euo pipefail` from a scratch directory (its own `.local/`), with `.venv/bin/` meaning
this checkout's virtualenv, and must exit 0 without a traceback.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SHELLS = ("bash", "sh", "shell", "console")
MARKER = re.compile(r"^<!--\s*(runnable|not-runnable:\s*\S.*?)\s*-->$")
BLOCK_TIMEOUT_S = 180


@dataclass(frozen=True)
class Block:
    line: int
    marker: str | None
    text: str


def shell_blocks(markdown: str) -> list[Block]:
    """The fenced shell blocks of `markdown` with the marker on the line before each (if any)."""
    blocks: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        if fence.startswith("```") and fence[3:].strip() in SHELLS:
            start = i
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                body.append(lines[i])
                i += 1
            before = lines[start - 1].strip() if start > 0 else ""
            found = MARKER.match(before)
            blocks.append(Block(start + 1, found.group(1) if found else None, "\n".join(body)))
        i += 1
    return blocks


BLOCKS = shell_blocks(README.read_text(encoding="utf-8"))
RUNNABLE = [b for b in BLOCKS if b.marker == "runnable"]


def test_every_readme_shell_block_says_whether_it_is_runnable() -> None:
    unmarked = [b.line for b in BLOCKS if b.marker is None]

    assert unmarked == [], (
        f"README.md shell blocks at lines {unmarked} have no marker: put `<!-- runnable -->` "
        "or `<!-- not-runnable: <why> -->` on the line before the fence"
    )
    assert RUNNABLE, "README.md has no runnable block: the convention tests nothing"


def test_the_marker_parser_tells_marked_unmarked_and_excluded_blocks_apart() -> None:
    text = "<!-- runnable -->\n```bash\necho a\n```\n\n```sh\necho b\n```\n"
    text += "<!-- not-runnable: needs Docker -->\n```bash\ndocker ps\n```\n```text\nno\n```\n"

    blocks = shell_blocks(text)

    assert [(b.marker, b.text) for b in blocks] == [
        ("runnable", "echo a"),
        (None, "echo b"),
        ("not-runnable: needs Docker", "docker ps"),
    ]


@pytest.mark.slow
@pytest.mark.timeout(BLOCK_TIMEOUT_S * 2)
@pytest.mark.parametrize("block", RUNNABLE, ids=[f"README.md:{b.line}" for b in RUNNABLE])
def test_a_runnable_readme_block_runs(block: Block, tmp_path: Path) -> None:
    venv_bin = Path(sys.executable).parent
    script = re.sub(r"(?<![\w/])\.venv/bin/", f"{venv_bin}/", block.text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
    env["TURNKEEP_LOCAL_DIR"] = str(tmp_path / ".local")

    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )

    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Traceback" not in output, output
