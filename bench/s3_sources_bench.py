"""Bedrock `s3Location` sources: what a Nova turn with a PNG and a PDF costs sent as S3 objects
(`attachment_source=auto`) against sent as bytes (`bytes`) (docs/attachments.md, "S3 sources").

Whole turns (`run_turn`) on the DynamoDB+S3 backend under moto (in-process), the model Bedrock
Nova Lite through the wire-level test server (tests/support/bedrock_wire.py, which validates each
request and reads each `s3Location` from moto's S3 with a client of its own). Per mode it prints
the median of: the Converse request's JSON size, the S3 GetObject calls the harness made in the
turn, and the turn's wall time (after one uncounted warm-up turn per mode); then the ratios
bytes / auto. The wall time of `auto` includes the stand-in's own reads of the objects from
moto (Bedrock's happen inside Bedrock), so it says little about AWS; the size and the GETs are
what the mode changes. `--smoke` runs fewer turns on smaller files (CI). Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the wire server and the file makers live with the tests

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from moto import mock_aws  # noqa: E402
from PIL import Image  # noqa: E402

from tests.support import attachment_files as files  # noqa: E402
from tests.support.aws_template import create_bucket, create_table  # noqa: E402
from tests.support.bedrock_wire import Answer, BedrockWire, Received, stream_frames  # noqa: E402
from turnkeep.attachments import AttachmentStore  # noqa: E402
from turnkeep.envelope import MemoryEnvelopeStore  # noqa: E402
from turnkeep.harness import HarnessDeps, HarnessLimits, run_turn  # noqa: E402
from turnkeep.harness.io import AttachmentRef  # noqa: E402
from turnkeep.providers.bedrock import BedrockProvider  # noqa: E402
from turnkeep.providers.scripted import ScriptedProvider  # noqa: E402
from turnkeep.storage.aws import AwsRepository  # noqa: E402

REGION = "us-east-1"
NOVA = "amazon.nova-lite-v1:0"
MB = 1024 * 1024


def _answer(received: Received) -> Answer:
    return Answer(stream_frames(ScriptedProvider().complete(received.request())))


def _noisy_png(side: int) -> bytes:
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, format="PNG")
    return out.getvalue()


def _client(service: str, **over: Any) -> Any:
    return boto3.client(service, region_name=REGION, **over)


def _upload(repo: AwsRepository, session_id: str, name: str, kind: str, data: bytes) -> Any:
    storage = repo.open(session_id)
    try:
        store = AttachmentStore(storage)
        digest = hashlib.sha256(data).hexdigest()
        record = store.create(name=name, media_type=kind, size=len(data), sha256=digest)
        store.receive(record.id, data)
    finally:
        storage.close()
    return AttachmentRef(attachment_id=record.id, name=name, media_type=kind, size=len(data))


def _turns(mode: str, png: bytes, pdf: bytes, turns: int) -> dict[str, float]:
    name = f"bench-{uuid.uuid4().hex[:10]}"
    s3 = _client("s3")
    gets = {"n": 0}
    s3.meta.events.register(
        "before-call.s3.GetObject", lambda **_: gets.__setitem__("n", gets["n"] + 1)
    )
    dynamodb = _client("dynamodb")
    create_table(dynamodb, name)
    create_bucket(s3, name)
    repo = AwsRepository(name, name, "tk", dynamodb_client=dynamodb, s3_client=s3)
    sizes, counts, times = [], [], []
    with BedrockWire(responder=_answer, s3=_client("s3")) as wire:
        bedrock = _client(
            "bedrock-runtime",
            endpoint_url=wire.url,
            config=Config(retries={"total_max_attempts": 1}),
        )
        # The first turn of each mode pays for imports and clients: not counted.
        for turn in range(turns + 1):
            session_id = f"s-{uuid.uuid4().hex[:10]}"
            envelopes = MemoryEnvelopeStore()
            envelopes.create(session_id, "bench", {})
            refs = [
                _upload(repo, session_id, "shot.png", "image/png", png),
                _upload(repo, session_id, "contract.pdf", "application/pdf", pdf),
            ]
            deps = HarnessDeps(
                open_storage=repo.open,
                envelopes=envelopes,
                provider=BedrockProvider(NOVA, bedrock),
                limits=HarnessLimits(attachment_source=mode),
            )
            before = gets["n"]
            started = time.perf_counter()
            result = run_turn(deps, session_id, "bench", "what are these?", attachments=refs)
            times.append((time.perf_counter() - started) * 1000)
            if result.status != "completed" or wire.invalid:
                raise SystemExit(f"{mode}: turn {result.status} {result.error} {wire.invalid}")
            if turn == 0:
                continue
            counts.append(gets["n"] - before)
            sizes.append(len(json.dumps(wire.received[-1].body)))
    return {
        "request_bytes": statistics.median(sizes),
        "s3_gets": statistics.median(counts),
        "turn_ms": statistics.median(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="fewer turns, smaller files (CI)")
    smoke = parser.parse_args().smoke
    turns, side, pdf_bytes = (2, 200, 256 * 1024) if smoke else (9, 1000, 2 * MB)
    png = _noisy_png(side)
    pdf = files.pdf() + b"%" + os.urandom(pdf_bytes) + b"\n%%EOF\n"
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        os.environ.setdefault(name, value)
    print(f"Nova Lite turn with a PNG ({len(png) / MB:.2f} MB) and a PDF ({len(pdf) / MB:.2f} MB)")
    print(f"median of {turns} turns per mode, aws backend under moto, Bedrock wire-level server")
    with mock_aws():
        found = {mode: _turns(mode, png, pdf, turns) for mode in ("auto", "bytes")}
    print(f"{'mode':<6} {'request JSON':>14} {'S3 GETs':>8} {'turn ms':>9}")
    for mode, figures in found.items():
        print(
            f"{mode:<6} {figures['request_bytes']:>14,.0f} {figures['s3_gets']:>8.0f} "
            f"{figures['turn_ms']:>9.1f}"
        )
    auto, raw = found["auto"], found["bytes"]
    print(
        f"ratio bytes/auto: request {raw['request_bytes'] / auto['request_bytes']:.0f}x, "
        f"turn time {raw['turn_ms'] / auto['turn_ms']:.2f}x, "
        f"S3 GETs {raw['s3_gets']:.0f} vs {auto['s3_gets']:.0f}"
    )


if __name__ == "__main__":
    main()
