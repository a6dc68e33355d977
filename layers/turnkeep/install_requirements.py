"""Install the layer's third-party packages: turnkeep's requirements and every agent's, in one
pip resolution (docs/agent.md, "Where the code lives").

    install_requirements.py --python PY --target DIR --platform TAG LAYER_REQS AGENTS_DIR

The agents' files are `AGENTS_DIR/requirements.txt` (shared by the agents) and
`AGENTS_DIR/<package>/requirements.txt` (one agent's own), in that order. When pip cannot
resolve them together, the build ends with pip's own output and then one line naming the
conflicting requirements and the files that ask for them (exit status 2).

Run by the Makefile with the build's Python; needs nothing beyond the standard library.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

_REQUESTED = re.compile(r"The user requested (?P<req>\S.*?)\s*$")


def agent_requirement_files(agents: Path) -> list[Path]:
    """The agents' requirement files that exist: the shared one, then each package's."""
    found = [agents / "requirements.txt"]
    found += sorted(agents.glob("*/requirements.txt"))
    return [path for path in found if path.is_file()]


def pip_command(python: str, target: str, platform: str, files: list[Path]) -> list[str]:
    """The one pip run that installs every file's requirements for the Lambda runtime."""
    command = [
        python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--target", target, "--platform", platform, "--implementation", "cp",
        "--python-version", "3.12", "--only-binary=:all:",
    ]  # fmt: skip
    for path in files:
        command += ["-r", str(path)]
    return command


def conflict_line(pip_output: str, files: list[Path]) -> str:
    """One line for a failed resolution: what conflicts, and which files ask for it."""
    requested = [m["req"] for m in map(_REQUESTED.search, pip_output.splitlines()) if m]
    if not requested:
        last = [line.strip() for line in pip_output.splitlines() if line.strip()]
        cause = last[-1] if last else "pip failed without saying why"
        return f"layer build: the requirements cannot be installed: {cause}"
    asked = []
    for requirement in dict.fromkeys(requested):
        if requirement.startswith("(constraint) "):
            asked.append(f"{requirement.removeprefix('(constraint) ')} (a pip constraint)")
            continue
        where = [str(f) for f in files if _asks_for(f, requirement)]
        asked.append(f"{requirement} ({', '.join(where) or 'a dependency'})")
    return "layer build: conflicting requirements: " + " vs ".join(asked)


def _asks_for(path: Path, requirement: str) -> bool:
    wanted = requirement.replace(" ", "")
    for line in path.read_text().splitlines():
        if line.split("#", 1)[0].replace(" ", "") == wanted:
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="install_requirements.py")
    parser.add_argument("--python", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--platform", required=True)
    parser.add_argument("layer_requirements", type=Path)
    parser.add_argument("agents", type=Path)
    args = parser.parse_args(argv)
    files = [args.layer_requirements, *agent_requirement_files(args.agents)]
    command = pip_command(args.python, args.target, args.platform, files)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout)
    if done.returncode == 0:
        sys.stderr.write(done.stderr)
        return 0
    sys.stderr.write(done.stderr)
    print(conflict_line(done.stdout + done.stderr, files), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
