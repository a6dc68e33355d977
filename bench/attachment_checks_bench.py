"""Attachment checks: the cost of checking a file's bytes (docs/attachments.md, "Checks").

For each format, a file near the size the limits allow (a noisy PNG and JPEG, a PDF, a DOCX
and an XLSX with an incompressible part, Markdown, CSV) is checked with `check_bytes` and the
median time printed in ms and ms per MB, plus the refusal time of the hostile files (the zip
bomb DOCX stops at its cap). `--smoke` runs fewer repeats on smaller files (CI). Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the file makers live with the tests

from PIL import Image  # noqa: E402

from tests.support import attachment_files as files  # noqa: E402
from turnkeep.attachments import BEDROCK_LIMITS, AttachmentRefused, check_bytes  # noqa: E402

MB = 1024 * 1024


def _noisy_image(fmt: str, side: int) -> bytes:
    import io

    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, format=fmt)
    return out.getvalue()


def _text(line: str, size: int) -> bytes:
    return (line * (size // len(line) + 1)).encode()[:size]


def _median_ms(call: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        with contextlib.suppress(AttachmentRefused):
            call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="fewer repeats, smaller files (CI)")
    smoke = parser.parse_args().smoke
    repeats, scale = (3, 4) if smoke else (15, 1)
    side = 1000 // scale
    doc_bytes = 4 * MB // scale
    cases = [
        ("PNG (noise)", "a.png", "image/png", _noisy_image("PNG", side)),
        ("JPEG (noise)", "a.jpg", "image/jpeg", _noisy_image("JPEG", side)),
        (
            "PDF",
            "a.pdf",
            "application/pdf",
            files.pdf() + b"%" + os.urandom(doc_bytes) + b"\n%%EOF\n",
        ),
        (
            "DOCX",
            "a.docx",
            files.DOCX_TYPE,
            files.office("docx", {"word/media/n.bin": os.urandom(doc_bytes)}),
        ),
        (
            "XLSX",
            "a.xlsx",
            files.XLSX_TYPE,
            files.office("xlsx", {"xl/media/n.bin": os.urandom(doc_bytes)}),
        ),
        ("Markdown", "a.md", "text/markdown", _text("# heading\n\nsome *text* here.\n", doc_bytes)),
        ("CSV", "a.csv", "text/csv", _text("1,alpha,2.5,true\n", doc_bytes)),
    ]
    hostile = [
        ("zip bomb DOCX (60 MiB of zeros)", "b.docx", files.DOCX_TYPE, files.zip_bomb_docx()),
        ("1x100000 PNG", "t.png", "image/png", files.tall_png()),
        ("PNG+ZIP polyglot", "p.png", "image/png", files.polyglot_png_zip()),
        ("PDF renamed .png", "r.png", "image/png", files.pdf()),
    ]
    print(f"attachment checks ({'smoke' if smoke else 'full'}: median of {repeats})")
    per_mb = []
    for label, name, media_type, data in cases:
        ms = _median_ms(
            lambda d=data, n=name, t=media_type: check_bytes(
                d, name=n, declared_type=t, limits=BEDROCK_LIMITS
            ),
            repeats,
        )
        rate = ms / (len(data) / MB)
        per_mb.append(rate)
        print(f"  {label:<14} {len(data) / MB:6.2f} MB  {ms:8.2f} ms  {rate:7.2f} ms/MB")
    print(f"  median over formats: {statistics.median(per_mb):.2f} ms/MB")
    for label, name, media_type, data in hostile:
        ms = _median_ms(
            lambda d=data, n=name, t=media_type: check_bytes(
                d, name=n, declared_type=t, limits=BEDROCK_LIMITS
            ),
            repeats,
        )
        print(f"  refused: {label:<32} {len(data):>8} bytes  {ms:8.2f} ms")


if __name__ == "__main__":
    main()
