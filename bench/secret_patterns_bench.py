"""Working-notes secret check: false-positive rate, detection rate and scan time.

Scans every line of the ordinary-notes corpus (`tests/data/notes_corpus.txt`: prose, code,
paths, ids, hashes, UUIDs, URLs, commit SHAs) and every known-secret sample
(`tests/support/secret_samples.py`, including secrets split by invisible characters), then
times a full-cap (32 KiB) note of corpus text, ASCII and with invisible characters mixed in.
`--smoke` times fewer repeats (CI). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the corpus and samples live with the tests

from tests.support.secret_samples import SECRET_SAMPLES  # noqa: E402
from turnkeep.notes import find_secret  # noqa: E402

CAP_BYTES = 32768


def _median_ms(text: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        find_secret(text)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _cap_block(lines: list[str], joiner: str) -> str:
    block, size = [], 0
    for line in lines * 20:
        size += len(line.encode()) + len(joiner.encode()) + 1
        if size > CAP_BYTES:
            break
        block.append(line)
    return (joiner + "\n").join(block)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="fewer timing repeats (CI)")
    repeats = 5 if parser.parse_args().smoke else 50
    lines = (ROOT / "tests" / "data" / "notes_corpus.txt").read_text(encoding="utf-8").splitlines()
    flagged = [line for line in lines if find_secret(line) is not None]
    caught = [(kind, note) for kind, note in SECRET_SAMPLES if find_secret(note) == kind]
    print("working-notes secret check")
    print(
        f"  ordinary notes corpus : {len(lines)} lines ({len(set(lines))} distinct), "
        f"{len(flagged)} flagged -> false-positive rate {len(flagged) / len(lines):.2%}"
    )
    print(
        f"  known-secret samples  : {len(caught)}/{len(SECRET_SAMPLES)} flagged as their kind "
        f"({len({k for k, _ in SECRET_SAMPLES})} kinds)"
    )
    ascii_block = _cap_block(lines, "")
    hidden_block = _cap_block(lines, "\u200b")
    plain, hidden = _median_ms(ascii_block, repeats), _median_ms(hidden_block, repeats)
    print(
        f"  32 KiB note, scan     : {plain:.2f} ms median (corpus text); "
        f"{hidden:.2f} ms with zero-width spaces mixed in"
    )


if __name__ == "__main__":
    main()
