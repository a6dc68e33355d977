"""Usage written before costs were integer micro-dollars still reads: a JSONL file of format
v4 (rows with a float `cost_usd`) opens and takes new rows, and a DynamoDB head's stats text
with `cost_usd` decodes to micro-dollars (docs/jsonl-format.md, docs/aws-storage.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnkeep.storage import StorageCorruptionError, UsageRow, insert_usage, open_storage
from turnkeep.storage.aws.codec import stats_from_text, stats_to_text
from turnkeep.storage.records import StorageStats

# A v4 main file as turnkeep wrote it (never regenerate it from the current encoder).
V4_FILE = (
    '{"v":4,"kind":"session_header","sessionId":"s1","storageVersion":1,"nextSeq":1}\n'
    '{"kind":"txn","seqs":[1],"ts":1764520000000,"writes":[{"kind":"usage","row":'
    '{"input_tokens":10,"output_tokens":2,"cache_read_tokens":0,"cache_write_tokens":0,'
    '"cost_usd":0.0125,"model":"m"}}]}\n'
)


def test_a_v4_jsonl_file_reads_its_float_costs_as_micro_dollars_and_takes_new_rows(
    tmp_path: Path,
) -> None:
    (tmp_path / "s1.jsonl").write_text(V4_FILE)
    url = f"jsonl://{tmp_path}"

    with open_storage(url, "s1") as storage:
        assert storage.get_stats().cost_micros == 12_500
        storage.commit([insert_usage(UsageRow(input_tokens=1, cost_micros=3, op_id="op-1"))])
    with open_storage(url, "s1") as storage:
        usage = storage.snapshot().usage
        assert [(row.cost_micros, row.op_id) for row in usage] == [(12_500, None), (3, "op-1")]
        assert storage.get_stats().cost_micros == 12_503


def test_a_jsonl_file_of_an_unknown_format_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "s1.jsonl").write_text(V4_FILE.replace('"v":4', '"v":3'))

    with pytest.raises(StorageCorruptionError, match=r"v=3"):
        open_storage(f"jsonl://{tmp_path}", "s1").get_stats()


def test_a_dynamodb_heads_stats_in_dollars_decode_to_micro_dollars() -> None:
    old = json.dumps({"usage_rows": 2, "input_tokens": 5, "cost_usd": 0.75})

    assert stats_from_text(old) == StorageStats(usage_rows=2, input_tokens=5, cost_micros=750_000)
    fresh = StorageStats(usage_rows=1, cost_micros=42)
    assert stats_from_text(stats_to_text(fresh)) == fresh
