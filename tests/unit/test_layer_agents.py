"""The layer build ships the agents' home: `shared/turnkeep_agents/` is copied beside turnkeep
and its requirements are resolved in the same pip run as the layer's, with no edit to a Makefile
or a handler; the built layer imports the example agent."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE_PYTHON = """#!/bin/sh
# pip only records its arguments (no download in the tests); anything else is the real Python.
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
    printf '%s\\n' "$*" >> "{record}"
    exit 0
fi
exec "{python}" "$@"
"""


def test_the_layer_build_copies_the_agents_home_and_installs_its_requirements(
    tmp_path: Path,
) -> None:
    record = tmp_path / "pip-args.txt"
    python = tmp_path / "python3.12"
    python.write_text(FAKE_PYTHON.format(record=record, python=sys.executable))
    python.chmod(0o755)
    artifacts = tmp_path / "artifacts"

    subprocess.run(
        [
            "make", "-s", "-f", str(ROOT / "layers" / "turnkeep" / "Makefile"),
            "build-TurnkeepLayerX8664", f"ARTIFACTS_DIR={artifacts}", f"PYTHON={python}",
        ],
        cwd=ROOT / "shared", check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    (pip,) = record.read_text().splitlines()
    args = shlex.split(pip)
    assert args[args.index("-r") :] == [
        "-r",
        str(ROOT / "layers" / "turnkeep" / "requirements.txt"),
        "-r",
        "turnkeep_agents/requirements.txt",
    ]
    layer = artifacts / "python"
    assert (layer / "turnkeep_agents" / "release_assistant" / "assistant.py").is_file()
    assert (layer / "turnkeep_agents" / "requirements.txt").is_file()
    probe = (
        "import turnkeep_agents, turnkeep.runtime.agent_loading as loading; "
        "agent = loading.load_agent('turnkeep_agents.release_assistant:agent'); "
        "print(turnkeep_agents.__file__); print([t.name for t in agent.tools])"
    )
    env = {**os.environ, "PYTHONPATH": str(layer)}
    shown = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert shown[0].startswith(str(layer))
    assert shown[1] == "['lookup_ticket', 'check_ci', 'publish_release_notes']"
