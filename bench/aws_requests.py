"""Count the AWS requests of the aws storage backend under moto and print them per operation.

Goals (issue #3): a scoped commit costs at most 2 requests, a session commit at most 2, and
retiring a scope of N objects at most 1 + 2*ceil(N/1000). Requests are counted with a botocore
"before-call" hook (one per API call). `--smoke` uses small sizes and finishes in seconds.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import boto3
from moto import mock_aws

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.aws_template import create_bucket, create_table
from turnkeep.storage import (
    append_list,
    ephemeral_scope,
    insert_entry,
    insert_usage,
    retire_scope,
    set_value,
    value,
    value_list,
)
from turnkeep.storage.aws import AwsRepository
from turnkeep.storage.aws.codec import encode_object
from turnkeep.storage.aws.instrument import RequestCounter
from turnkeep.storage.aws.keys import HEAD_SK, session_pk
from turnkeep.storage.writes import UsageRow

REGION = "us-east-1"
TABLE, BUCKET, PREFIX = "bench", "bench-bucket", "bench"
Row = tuple[str, int, str, str]


def _fill_scope(repo: AwsRepository, session_id: str, scope_id: str, count: int) -> None:
    """Write `count` one-write transactions of a scope directly (uncounted set-up)."""
    head = repo.dynamodb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": session_pk(session_id)}, "sk": {"S": HEAD_SK}},
        UpdateExpression="ADD last_seq :k",
        ExpressionAttributeValues={":k": {"N": str(count)}},
        ReturnValues="UPDATED_NEW",
    )
    last = int(head["Attributes"]["last_seq"]["N"])
    for seq in range(last - count + 1, last + 1):
        write = {"op": "append", "ns": "frames", "key": "", "v": f'"frame {seq}"', "seq": seq}
        repo.s3.put_object(
            Bucket=BUCKET,
            Key=repo.objects.transaction_key(session_id, scope_id, seq),
            Body=encode_object(session_id, scope_id, [write]),
        )


def _breakdown(counter: RequestCounter) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counter.calls.items()))


def measure(retire_sizes: list[int], cold_objects: int) -> list[Row]:
    """Run every measured operation once and return (operation, requests, goal, breakdown)."""
    rows: list[Row] = []
    ddb = boto3.client("dynamodb", region_name=REGION)
    s3 = boto3.client("s3", region_name=REGION)
    create_table(ddb, TABLE)
    create_bucket(s3, BUCKET)
    repo = AwsRepository(TABLE, BUCKET, PREFIX, dynamodb_client=ddb, s3_client=s3)
    counter = RequestCounter().attach(ddb, s3)
    op = ephemeral_scope("op-1")

    counter.reset()
    st = repo.open("s1")
    rows.append(("open (nothing pending)", counter.total, "-", _breakdown(counter)))

    counter.reset()
    st.commit(
        [
            insert_entry("m1", None, "message", {"role": "user", "text": "hi"}),
            set_value(value("op", "state"), {"phase": "model"}),
            insert_usage(UsageRow(input_tokens=10, output_tokens=5, cost_usd=0.001)),
        ]
    )
    rows.append(("session commit (head cached)", counter.total, "<= 2", _breakdown(counter)))

    rival = AwsRepository(TABLE, BUCKET, PREFIX, dynamodb_client=ddb, s3_client=s3).open("s1")
    rival.commit([set_value(value("rival"), 1)])
    counter.reset()
    st.commit([insert_entry("m2", "m1", "message", {"role": "assistant"})])
    rows.append(("session commit after a rival write", counter.total, "-", _breakdown(counter)))
    rival.close()

    counter.reset()
    st.commit([append_list(value_list("frames", "", op), {"delta": "tok"})])
    rows.append(("scoped commit", counter.total, "<= 2", _breakdown(counter)))

    counter.reset()
    st.commit(
        [append_list(value_list("frames", "", op), {"delta": "ok"})], guard=value("op", "state")
    )
    rows.append(("guarded scoped commit", counter.total, "<= 2", _breakdown(counter)))
    st.close()

    for size in retire_sizes:
        session_id = f"retire-{size}"
        _fill_scope(repo, session_id, op.id, size)
        with repo.open(session_id) as handle:
            counter.reset()
            handle.commit([retire_scope(op), set_value(value("op", "state"), "done")])
            goal = 1 + 2 * math.ceil(size / 1000)
            rows.append(
                (f"retirement of {size} objects", counter.total, f"<= {goal}", _breakdown(counter))
            )

    _fill_scope(repo, "cold", op.id, cold_objects)
    counter.reset()
    cold = AwsRepository(TABLE, BUCKET, PREFIX, dynamodb_client=ddb, s3_client=s3).open("cold")
    frames = cold.read_list(value_list("frames", "", op))
    assert len(frames) == cold_objects, "cold read must see every transaction"
    rows.append(
        (
            f"cold open + read of a scope of {cold_objects} txns",
            counter.total,
            f"{cold_objects + 3} (3 + 1 GET each)",
            _breakdown(counter),
        )
    )
    counter.reset()
    cold.read_list(value_list("frames", "", op))
    rows.append(("repeated read of that scope", counter.total, "0", _breakdown(counter) or "-"))
    cold.close()
    return rows


def main() -> None:
    """Print the request table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="small sizes, a few seconds")
    args = parser.parse_args()
    sizes, cold = ([1, 1001], 20) if args.smoke else ([1, 100, 5000], 200)
    with mock_aws():
        rows = measure(sizes, cold)
    width = max(len(r[0]) for r in rows)
    print(f"{'operation':<{width}}  {'requests':>8}  {'goal':<20}  breakdown")
    for name, count, goal, breakdown in rows:
        print(f"{name:<{width}}  {count:>8}  {goal:<20}  {breakdown}")


if __name__ == "__main__":
    main()
