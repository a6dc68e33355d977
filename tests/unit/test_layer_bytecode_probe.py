"""The layer bytecode probe (tools/sam_local/bytecode.py) names every module compiled from
source on a read-only layer, and none when shipped .pyc files are usable."""

from __future__ import annotations

import compileall
import os
import py_compile
import sys
from pathlib import Path

from tools.sam_local.bytecode import source_compiles


def _package(root: Path) -> Path:
    layer = root / "python"
    (layer / "pkg").mkdir(parents=True)
    (layer / "pkg" / "__init__.py").write_text("from pkg import mod\n", encoding="utf-8")
    (layer / "pkg" / "mod.py").write_text("VALUE = 42\n", encoding="utf-8")
    return layer


def test_without_bytecode_every_module_is_compiled_from_source(tmp_path: Path) -> None:
    layer = _package(tmp_path)

    compiled = source_compiles(layer, sys.executable, ["pkg"])

    assert sorted(compiled) == ["pkg/__init__.py", "pkg/mod.py"]


def test_unchecked_hash_bytecode_is_used_whatever_the_file_times(tmp_path: Path) -> None:
    layer = _package(tmp_path)
    compileall.compile_dir(
        layer, quiet=1, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    for source in layer.rglob("*.py"):  # what a zip round trip may do to file times
        os.utime(source, (1_000_000_000, 1_000_000_000))

    assert source_compiles(layer, sys.executable, ["pkg"]) == []


def test_timestamp_bytecode_is_ignored_once_the_file_times_change(tmp_path: Path) -> None:
    layer = _package(tmp_path)
    compileall.compile_dir(
        layer, quiet=1, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP
    )
    for source in layer.rglob("*.py"):
        os.utime(source, (1_000_000_000, 1_000_000_000))

    assert sorted(source_compiles(layer, sys.executable, ["pkg"])) == [
        "pkg/__init__.py",
        "pkg/mod.py",
    ]
