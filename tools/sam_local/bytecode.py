"""Is a built layer's bytecode used as shipped? Lambda's file system is read-only, so a module
whose .pyc is missing, stale or for another Python is compiled from source at every cold start.

`source_compiles()` imports modules from a read-only copy of a layer's `python/` directory with
the given interpreter (the runtime's: python3.12), bytecode writing off (`-B`: `-I` ignores
PYTHONDONTWRITEBYTECODE, and root ignores file modes), and names every module of the layer that
Python compiled from source instead of loading its .pyc.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

# Runs in the checked interpreter: counts SourceLoader.source_to_code calls (what the import
# system does when no usable .pyc exists) for files under the layer copy.
_PROBE = """
import importlib.abc, importlib.machinery, json, sys
layer = sys.argv[1]
compiled = []
original = importlib.machinery.SourceFileLoader.source_to_code
def source_to_code(self, data, path, *args, **kwargs):
    if str(path).startswith(layer):
        compiled.append(str(path)[len(layer) + 1:])
    return original(self, data, path, *args, **kwargs)
importlib.machinery.SourceFileLoader.source_to_code = source_to_code
sys.path.insert(0, layer)
for name in sys.argv[2:]:
    __import__(name)
loaded = sum(1 for m in list(sys.modules.values())
             if str(getattr(m, "__file__", "") or "").startswith(layer))
print(json.dumps({"compiled": compiled, "loaded": loaded}))
"""


def source_compiles(layer_python: Path, python: str, modules: list[str]) -> list[str]:
    """Files of `layer_python` compiled from source while `python` imports `modules` from a
    read-only copy of it (an empty list: every .pyc was used)."""
    return probe(layer_python, python, modules)[0]


def probe(layer_python: Path, python: str, modules: list[str]) -> tuple[list[str], int]:
    """(files compiled from source, modules loaded from the layer) for `source_compiles`."""
    with tempfile.TemporaryDirectory(prefix="layer-bytecode-") as scratch:
        copy = Path(scratch) / "python"
        shutil.copytree(layer_python, copy, symlinks=True)
        _read_only(copy)
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            done = subprocess.run(
                [python, "-I", "-B", "-c", _PROBE, str(copy), *modules],
                capture_output=True, text=True, check=False, env=env, timeout=300,
            )  # fmt: skip
        finally:
            _writable(copy)  # so the temporary directory can be removed
    if done.returncode != 0:
        raise RuntimeError(f"{python} could not import {modules}: {done.stderr.strip()[-2000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return list(report["compiled"]), int(report["loaded"])


def _read_only(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        if not stat.S_ISLNK(mode):
            path.chmod(stat.S_IMODE(mode) & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _writable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        if not stat.S_ISLNK(mode):
            path.chmod(stat.S_IMODE(mode) | stat.S_IWUSR)
