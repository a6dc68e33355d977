"""Long sessions (issue #12), imported by turn_bench.py: bytes read and tokens sent per cold
model round by session size, and a many-turn session on a small budget.

A *cold* model round is what a new Lambda container pays: a new storage repository and an empty
transcript cache. Bytes are the sizes of the DynamoDB and S3 responses under moto (a botocore
`after-call` hook next to `RequestCounter`'s `before-call` one). Prior messages are written
directly to storage (a turn = a user and an assistant entry), not produced by real turns.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.aws_template import create_bucket, create_table
from turnkeep.envelope import EnvelopeStore, open_envelope_store
from turnkeep.harness import HarnessDeps, HarnessLimits, run_turn, steps
from turnkeep.harness.io import FinishTurnInput, ModelStepInput, StartTurnInput
from turnkeep.harness.state import head_address
from turnkeep.harness.transcript import TranscriptCache, entry_data
from turnkeep.providers.base import Message, ModelProvider, ModelRequest, StreamEvent, TextPart
from turnkeep.providers.compaction import is_compaction_request
from turnkeep.providers.factory import provider_from_config
from turnkeep.providers.scripted import input_token_count
from turnkeep.storage import Write, insert_entry, open_storage, set_value
from turnkeep.storage.aws import AwsRepository
from turnkeep.storage.aws.head import Head
from turnkeep.storage.aws.instrument import RequestCounter
from turnkeep.storage.aws.session_txn import plan_session_commit
from turnkeep.storage.writes import build_transaction

REGION = "us-east-1"
TABLE, BUCKET, PREFIX = "long-bench", "long-bench-bucket", "bench"
USER = "bench-user"
FILLER = "lorem ipsum dolor sit amet " * 11  # ~300 characters: 100 messages outgrow 8k tokens
SMALL = "scripted?context=8000"
UNBOUNDED = "scripted?context=4000000"
ENTRIES_PER_COMMIT = 40  # 2 items per entry + the head: within DynamoDB's 100 actions


class ResponseBytes:
    """Sums the body sizes of every response a client receives (botocore `after-call`)."""

    def __init__(self) -> None:
        self.total = 0

    def attach(self, *clients: Any) -> ResponseBytes:
        for client in clients:
            client.meta.events.register("after-call.*.*", self._count)
        return self

    def _count(self, http_response: Any, model: Any, **_: Any) -> None:
        if model.has_streaming_output:  # reading .content would consume an S3 object body
            self.total += int(http_response.headers.get("content-length", 0))
        else:
            self.total += len(http_response.content)


@dataclass
class Recorder(ModelProvider):
    """Delegates to a provider and keeps the input tokens of its round (not compaction) calls."""

    inner: ModelProvider
    sent: list[int] = field(default_factory=list)
    compactions: int = 0
    name: str = "scripted"

    def __post_init__(self) -> None:
        self.context = self.inner.context

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        if is_compaction_request(request.system):
            self.compactions += 1
        else:
            self.sent.append(input_token_count(request))
        yield from self.inner.stream(request)


def prior_message_writes(count: int) -> list[Write]:
    """`count` messages (alternating user / assistant: whole turns) and the branch head."""
    parent: str | None = None
    writes: list[Write] = []
    for n in range(count):
        turn = f"prior-{n // 2}"
        if n % 2 == 0:
            message = Message("user", (TextPart(f"question {n // 2}: {FILLER}"),))
            entry_id, meta = f"{turn}:user", {"op": turn, "round": -1}
        else:
            message = Message("assistant", (TextPart(f"answer {n // 2}: {FILLER}"),))
            entry_id, meta = f"{turn}:r0", {"op": turn, "round": 0}
        writes.append(insert_entry(entry_id, parent, "message", entry_data(message, **meta)))
        parent = entry_id
    writes.append(set_value(head_address(), parent))
    return writes


def bulk_load(ddb: Any, table: str, session_id: str, writes: list[Write]) -> None:
    """Store `writes` as the aws backend's commits would, with BatchWriteItem instead of
    TransactWriteItems: moto copies the whole table for every transaction, which would make
    building a 10,000-message session take hours. Items and head are planned by the backend's
    own `plan_session_commit`, so the stored session is the same."""
    head = Head()
    last_update: dict[str, Any] = {}
    for start in range(0, len(writes), ENTRIES_PER_COMMIT):
        plan = plan_session_commit(
            build_transaction(writes[start : start + ENTRIES_PER_COMMIT]),
            table=table,
            session_id=session_id,
            head=head,
            done_markers=frozenset(),
        )
        items = [a["Put"]["Item"] for a in plan.actions if "Put" in a]
        for first in range(0, len(items), 25):
            requests = [{"PutRequest": {"Item": i}} for i in items[first : first + 25]]
            ddb.batch_write_item(RequestItems={table: requests})
        last_update = dict(plan.actions[0]["Update"])
        head = plan.new_head
    last_update.pop("ConditionExpression", None)
    values = dict(last_update["ExpressionAttributeValues"])
    values.pop(":expected", None)
    last_update["ExpressionAttributeValues"] = values
    ddb.update_item(**last_update)


def _deps(open_fn: Any, envelopes: EnvelopeStore, provider: ModelProvider) -> HarnessDeps:
    return HarnessDeps(
        open_storage=open_fn,
        envelopes=envelopes,
        provider=provider,
        limits=HarnessLimits(frame_interval_ms=1000, tool_parallelism=1),
        transcripts=TranscriptCache(),
    )


@contextmanager
def _rollback_snapshot_of_touched_items() -> Iterator[None]:
    """moto snapshots a table for rollback by deep-copying the *whole* table once per action of
    every TransactWriteItems, so commits slow down as a long session grows (O(actions x table)).
    This keeps moto's all-or-nothing behaviour with a snapshot of only the items the
    transaction names (the only ones it can change), restored when it fails."""
    from moto.dynamodb import models
    from moto.dynamodb.models.dynamo_type import DynamoType

    real_copy = models.copy
    original = models.DynamoDBBackend.transact_write_items

    class _TableAsIs:
        @staticmethod
        def deepcopy(obj: Any, memo: Any = None) -> Any:
            return obj if isinstance(obj, models.Table) else real_copy.deepcopy(obj, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        touched: dict[tuple[int, Any, Any], tuple[Any, Any, Any, Any]] = {}
        for action in transact_items:
            _, op = next(iter(action.items()))
            table = self.tables.get(op.get("TableName"))
            if table is None:
                continue
            raw = op.get("Key") or op.get("Item") or {}
            if table.hash_key_attr not in raw:
                continue  # moto rejects it before changing anything
            hash_key = DynamoType(raw[table.hash_key_attr])
            range_key = None
            if table.range_key_attr and table.range_key_attr in raw:
                range_key = DynamoType(raw[table.range_key_attr])
            bucket = table.items.get(hash_key)
            current = bucket if range_key is None or bucket is None else bucket.get(range_key)
            touched.setdefault(
                (id(table), hash_key, range_key),
                (table, hash_key, range_key, real_copy.deepcopy(current)),
            )
        models.copy = _TableAsIs  # type: ignore[assignment]
        try:
            original(self, transact_items)
        except Exception:
            for table, hash_key, range_key, before in touched.values():
                if range_key is None:
                    if before is None:
                        table.items.pop(hash_key, None)
                    else:
                        table.items[hash_key] = before
                elif before is None:
                    table.items.get(hash_key, {}).pop(range_key, None)
                else:
                    table.items[hash_key][range_key] = before
            raise
        finally:
            models.copy = real_copy

    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    try:
        yield
    finally:
        models.DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]


@contextmanager
def aws_clients() -> Iterator[tuple[Any, Any]]:
    """moto DynamoDB and S3 clients with the template's table and bucket."""
    with mock_aws(), _rollback_snapshot_of_touched_items():
        ddb = boto3.client("dynamodb", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        create_table(ddb, TABLE)
        create_bucket(s3, BUCKET)
        yield ddb, s3


@dataclass
class RoundFigures:
    """One cold model round."""

    prior: int
    compacted: bool
    bytes_read: int
    requests: int
    tokens_sent: int


def cold_round(ddb: Any, s3: Any, prior: int, *, compacted: bool) -> RoundFigures:
    """Build a session of `prior` messages, compact it once (or not), then measure one cold
    model round of the next turn."""
    session = f"cold-{prior}-{'c' if compacted else 'n'}"
    table = f"{TABLE}-{session}"  # one table each: moto's transactions copy the whole table
    create_table(ddb, table)
    envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
    envelopes.create(session, USER)
    spec = SMALL if compacted else UNBOUNDED
    bulk_load(ddb, table, session, prior_message_writes(prior))
    setup = AwsRepository(table, BUCKET, PREFIX, dynamodb_client=ddb, s3_client=s3)
    if compacted:  # one real turn compacts the history
        warm = Recorder(provider_from_config(spec))
        result = run_turn(_deps(setup.open, envelopes, warm), session, USER, "hello")
        assert result.status == "completed", result.error
        assert warm.compactions == 1, "the warm-up turn must compact"
    # A new "process": a new repository (no head or scope cache) and an empty transcript cache.
    cold_repo = AwsRepository(table, BUCKET, PREFIX, dynamodb_client=ddb, s3_client=s3)
    model = Recorder(provider_from_config(spec))
    deps = _deps(cold_repo.open, envelopes, model)
    op = f"op-{uuid.uuid4().hex}"
    steps.start_turn(deps, StartTurnInput(session_id=session, op_id=op, user_id=USER, text="hi"))
    deps = _deps(cold_repo.open, envelopes, model)
    counter = RequestCounter().attach(ddb, s3)
    size = ResponseBytes().attach(ddb, s3)
    out = steps.model_step(deps, ModelStepInput(session_id=session, op_id=op, round=0))
    counter.detach(ddb, s3)
    for client in (ddb, s3):
        client.meta.events.unregister("after-call.*.*", size._count)
    assert out.next == "finish", out
    steps.finish_turn(deps, FinishTurnInput(session_id=session, op_id=op))
    assert model.compactions == 0, "the measured round must not compact again"
    return RoundFigures(prior, compacted, size.total, counter.total, model.sent[-1])


def print_cold_rounds(sizes: list[int]) -> None:
    """The table of bytes read and tokens sent per cold model round, and the bounded-read ratio."""
    print("  cold model round on AWS (moto), by prior messages (bytes = DynamoDB + S3 responses):")
    print(
        f"    {'prior':>7}  {'context':<24}  {'bytes read':>11}  {'requests':>8}  "
        f"{'tokens sent':>11}"
    )
    compacted: dict[int, RoundFigures] = {}
    with aws_clients() as (ddb, s3):
        for prior in sizes:
            for flag in (False, True):
                row = cold_round(ddb, s3, prior, compacted=flag)
                if flag:
                    compacted[prior] = row
                label = f"compacted ({SMALL.split('?')[1]})" if flag else "whole (no budget)"
                print(
                    f"    {prior:>7}  {label:<24}  {row.bytes_read:>11,}  {row.requests:>8}  "
                    f"{row.tokens_sent:>11,}"
                )
    low, high = min(sizes), max(sizes)
    ratio = compacted[high].bytes_read / compacted[low].bytes_read
    print(
        f"    compacted bytes read at {high:,} / at {low:,} prior messages: {ratio:.2f} "
        "(goal <= 1.2)"
    )


NOTES = ("the launch code is 4711", "the cat is called Miso", "deploy on Fridays never")


def many_turns(
    backend: str, turns: int, spec: str = "scripted?context=4000", *, progress: int = 0
) -> None:
    """`turns` real turns on a small budget: every turn must complete and the notes survive.
    With `progress`, a line every that many turns (long runs on moto take a while)."""
    with tempfile.TemporaryDirectory() as tmp, _backend(backend, Path(tmp)) as open_fn:
        envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
        session = f"long-{uuid.uuid4().hex[:8]}"
        envelopes.create(session, USER)
        model = Recorder(provider_from_config(spec))
        deps = _deps(open_fn, envelopes, model)
        times: list[float] = []
        remembered: list[str] = []
        for n in range(turns):
            if n % max(1, turns // len(NOTES)) == 0 and len(remembered) < len(NOTES):
                text = f"remember {NOTES[len(remembered)]}"
                remembered.append(NOTES[len(remembered)])
            elif n % 5 == 4:
                text = f'call echo {{"text": "turn {n}"}}'
            else:
                text = f"turn {n}: {FILLER[: 40 + (n % 9) * 30]}"
            start = time.perf_counter()
            result = run_turn(deps, session, USER, text)
            times.append(time.perf_counter() - start)
            assert result.status == "completed", (n, result.error)
            if progress and (n + 1) % progress == 0:
                print(
                    f"    … {n + 1:,} turns on {backend}: {model.compactions} compactions, "
                    f"median of the last {progress} turns "
                    f"{statistics.median(times[-progress:]) * 1000:.1f} ms",
                    flush=True,
                )
        recall = run_turn(deps, session, USER, "what do you remember?")
        assert recall.status == "completed", recall.error
        with open_fn(session) as storage:
            answer = storage.get_entries([recall.final_entry_id or ""])[0].data
            markers = sum(1 for e in storage.scan_entries() if e.type == "compaction")
        text = str(answer)
        intact = all(note in text for note in remembered)
        assert intact, f"notes lost: {text[:300]}"
        budget = model.context.input_budget
        window = min(100, max(1, turns // 4))
        print(
            f"  {turns:,} turns on {backend} with {spec}: all completed, notes intact "
            f"({len(remembered)}/{len(remembered)}), {markers} compactions, tokens sent per round "
            f"max {max(model.sent):,} (budget {budget:,}), median turn "
            f"{statistics.median(times[:window]) * 1000:.1f} ms (first {window}) / "
            f"{statistics.median(times[-window:]) * 1000:.1f} ms (last {window})"
        )


@contextmanager
def _backend(backend: str, tmp: Path) -> Iterator[Any]:
    if backend == "sqlite":
        url = f"sqlite:///{tmp / 'long.db'}"
        keeper = open_storage(url, "keeper")  # held open like local mode (no WAL checkpoints)
        try:
            yield lambda sid: open_storage(url, sid)
        finally:
            keeper.close()
        return
    with aws_clients() as (ddb, s3):
        repo = AwsRepository(TABLE, BUCKET, PREFIX, dynamodb_client=ddb, s3_client=s3)
        yield repo.open
