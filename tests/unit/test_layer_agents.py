"""The layer build ships the agents' home: `shared/turnkeep_agents/` is copied beside turnkeep
and its requirements are resolved in the same pip run as the layer's, with no edit to a Makefile
or a handler; the built layer imports the example agent."""

from __future__ import annotations

import os
import shlex
import shutil
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


def _fake_python(tmp_path: Path, template: str, **fields: object) -> tuple[Path, Path]:
    """A `python3.12` from `template` (its pip records its arguments), and that record."""
    record = tmp_path / "pip-args.txt"
    python = tmp_path / "python3.12"
    python.write_text(template.format(record=record, python=sys.executable, **fields))
    python.chmod(0o755)
    return python, record


def _build(shared: Path, python: Path, artifacts: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "make", "-s", "-f", str(ROOT / "layers" / "turnkeep" / "Makefile"),
            "build-TurnkeepLayerX8664", f"ARTIFACTS_DIR={artifacts}", f"PYTHON={python}",
        ],
        cwd=shared, check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_layer_build_copies_the_agents_home_and_installs_its_requirements(
    tmp_path: Path,
) -> None:
    python, record = _fake_python(tmp_path, FAKE_PYTHON)
    artifacts = tmp_path / "artifacts"

    done = _build(ROOT / "shared", python, artifacts)

    assert done.returncode == 0, done.stderr

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


PIP_CONFLICT = """\
ERROR: Cannot install humanize==3.0 and humanize==4.9.0 because these package versions have \
conflicting dependencies.

The conflict is caused by:
    The user requested humanize==4.9.0
    The user requested humanize==3.0

To fix this you could try to:
1. loosen the range of package versions you've specified
2. remove package versions to allow pip to attempt to solve the dependency conflict

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/#dealing-with-dependency-conflicts
"""
"""What pip 2x prints for two agents pinning one package differently (its format, checked
against a real run; the test's pip only replays it)."""

CONFLICTING_PYTHON = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
    printf '%s\\n' "$*" >> "{record}"
    cat "{conflict}" >&2
    exit 1
fi
exec "{python}" "$@"
"""


def _shared_with_agents(tmp_path: Path, agents: dict[str, str]) -> Path:
    """A copy of shared/ (the layer's ContentUri) whose agents' home holds packages `agents`
    (name -> their requirements.txt)."""
    shared = tmp_path / "shared"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "shared" / "turnkeep", shared / "turnkeep", ignore=ignore)
    home = shared / "turnkeep_agents"
    shutil.copytree(ROOT / "shared" / "turnkeep_agents", home, ignore=ignore)
    for name, requirements in agents.items():
        (home / name).mkdir()
        (home / name / "__init__.py").write_text('"""An agent."""\n')
        (home / name / "requirements.txt").write_text(requirements)
    return shared


def test_each_agent_packages_own_requirements_join_the_layers_one_pip_resolution(
    tmp_path: Path,
) -> None:
    python, record = _fake_python(tmp_path, FAKE_PYTHON)
    shared = _shared_with_agents(tmp_path, {"pantry": "humanize==4.9.0\n", "zoo": "six\n"})

    done = _build(shared, python, tmp_path / "artifacts")

    assert done.returncode == 0, done.stderr
    (pip,) = record.read_text().splitlines()
    args = shlex.split(pip)
    assert args[args.index("-r") :] == [
        "-r", str(ROOT / "layers" / "turnkeep" / "requirements.txt"),
        "-r", "turnkeep_agents/requirements.txt",
        "-r", "turnkeep_agents/pantry/requirements.txt",
        "-r", "turnkeep_agents/zoo/requirements.txt",
    ]  # fmt: skip
    assert (tmp_path / "artifacts" / "python" / "turnkeep_agents" / "pantry").is_dir()


def test_agents_whose_requirements_conflict_fail_the_build_with_one_line_naming_the_files(
    tmp_path: Path,
) -> None:
    conflict = tmp_path / "pip-output.txt"
    conflict.write_text(PIP_CONFLICT)
    python, _record = _fake_python(tmp_path, CONFLICTING_PYTHON, conflict=conflict)
    shared = _shared_with_agents(
        tmp_path, {"pantry": "humanize==4.9.0\n", "zoo": "humanize==3.0\n"}
    )

    done = _build(shared, python, tmp_path / "artifacts")

    assert done.returncode != 0
    assert "ResolutionImpossible" in done.stderr  # pip's own account stays
    lines = [line for line in done.stderr.splitlines() if line.startswith("layer build:")]
    assert lines == [
        "layer build: conflicting requirements: "
        "humanize==4.9.0 (turnkeep_agents/pantry/requirements.txt) vs "
        "humanize==3.0 (turnkeep_agents/zoo/requirements.txt)"
    ]
    assert not (tmp_path / "artifacts" / "python" / "turnkeep").exists()  # nothing half-built
