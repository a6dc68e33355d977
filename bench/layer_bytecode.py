"""Cold import of the built layer on a read-only file system, with and without its shipped
bytecode: modules compiled from source and median import time (fresh interpreter each run).

Lambda's file system is read-only: a layer without usable .pyc files compiles every module from
source at each cold start. The layer build (layers/turnkeep/Makefile) ships unchecked-hash .pyc
compiled by python3.12. Default: the layer in .aws-sam/build (run `sam build` first) with
python3.12. `--smoke` (CI): a layer of the turnkeep package alone, compiled here with this
interpreter, imported a few times.
"""

from __future__ import annotations

import argparse
import compileall
import os
import py_compile
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.sam_local.bytecode import probe  # noqa: E402
from tools.sam_local.scenario import HANDLER_IMPORTS  # noqa: E402

BUILT = [ROOT / ".aws-sam" / "build" / name / "python"
         for name in ("TurnkeepLayerX8664", "TurnkeepLayerArm64")]  # fmt: skip


def import_seconds(layer: Path, python: str, modules: list[str], runs: int) -> float:
    """Median wall time of a fresh `python` importing `modules` from `layer`, no .pyc written."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    code = f"import sys; sys.path.insert(0, {str(layer)!r})\n" + "".join(
        f"import {m}\n" for m in modules
    )
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([python, "-I", "-B", "-c", code], check=True, env=env)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def without_bytecode(layer: Path, scratch: Path) -> Path:
    """A copy of `layer` with every __pycache__ removed (the old layer build)."""
    copy = scratch / "no-pyc" / "python"
    shutil.copytree(layer, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def smoke_layer(scratch: Path) -> Path:
    """The turnkeep package alone, with unchecked-hash bytecode of this interpreter."""
    layer = scratch / "smoke" / "python"
    shutil.copytree(ROOT / "shared" / "turnkeep", layer / "turnkeep",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    compileall.compile_dir(
        layer, quiet=1, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    return layer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="turnkeep only, few runs (CI)")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--python", default="python3.12")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="layer-bench-") as tmp:
        scratch = Path(tmp)
        found = [p for p in BUILT if p.is_dir()]
        if args.smoke or not found or shutil.which(args.python) is None:
            if not args.smoke:
                print(f"no built layer ({BUILT[0]}: run `sam build`) or no {args.python}: "
                      "measuring the turnkeep package alone")  # fmt: skip
            modules = ["turnkeep.harness", "turnkeep.storage", "turnkeep.api"]
            layer, python = smoke_layer(scratch), sys.executable
            runs = 3 if args.smoke else args.runs
        else:
            layer, python, modules, runs = found[0], args.python, HANDLER_IMPORTS, args.runs
        bare = without_bytecode(layer, scratch)
        shipped_compiled, loaded = probe(layer, python, modules)
        bare_compiled, _ = probe(bare, python, modules)
        with_pyc = import_seconds(layer, python, modules, runs)
        without_pyc = import_seconds(bare, python, modules, runs)
    print(f"layer: {layer} ({python}; imports: {', '.join(modules)})")
    print(f"modules loaded from the layer:          {loaded}")
    print(f"compiled from source, shipped .pyc:     {len(shipped_compiled)}")
    print(f"compiled from source, no .pyc (before): {len(bare_compiled)}")
    print(f"median cold import, shipped .pyc:       {with_pyc * 1000:.0f} ms (n={runs})")
    print(f"median cold import, no .pyc (before):   {without_pyc * 1000:.0f} ms (n={runs})")
    print(f"ratio before/after:                     {without_pyc / with_pyc:.2f}x")


if __name__ == "__main__":
    main()
