"""The envelope riding on session storage's requests where both live in one DynamoDB table
(docs/aws-storage.md, "Reads and caching"): read ahead in one BatchGetItem, written inside the
storage's TransactWriteItems, atomically — and a failed envelope condition writes nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.support.aws_template import create_bucket, create_table
from turnkeep.envelope import EnvelopeConflictError
from turnkeep.envelope.dynamodb import DynamoEnvelopeStore
from turnkeep.harness import HarnessDeps, HarnessLimits, StartTurnInput, cancel_turn, start_turn
from turnkeep.harness import finish_turn as run_finish
from turnkeep.harness.envelope_io import attachable, commit_with_envelope, read_ahead
from turnkeep.harness.io import FinishTurnInput
from turnkeep.harness.state import load_record
from turnkeep.harness.steps import terminal
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import set_value, value
from turnkeep.storage.aws import AwsRepository
from turnkeep.storage.aws.instrument import RequestCounter

TABLE, BUCKET = "attached", "attached-bucket"
USER = "user-a"


@dataclass
class Env:
    ddb: Any
    s3: Any

    def deps(self) -> HarnessDeps:
        repository = AwsRepository(TABLE, BUCKET, "a", dynamodb_client=self.ddb, s3_client=self.s3)
        return HarnessDeps(
            open_storage=repository.open,
            envelopes=DynamoEnvelopeStore(self.ddb, TABLE),
            provider=ScriptedProvider(),
            limits=HarnessLimits(frame_interval_ms=0),
        )


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        s3 = boto3.client("s3", region_name="us-east-1")
        create_table(ddb, TABLE)
        create_bucket(s3, BUCKET)
        yield Env(ddb, s3)


@pytest.fixture
def counter(env: Env) -> Iterator[RequestCounter]:
    counting = RequestCounter().attach(env.ddb, env.s3)
    yield counting
    counting.detach(env.ddb, env.s3)


def _session(deps: HarnessDeps) -> str:
    session_id = f"s-{uuid.uuid4().hex[:10]}"
    deps.envelopes.create(session_id, USER)
    return session_id


def test_reading_ahead_returns_the_envelope_and_answers_the_named_reads_in_one_request(
    env: Env, counter: RequestCounter
) -> None:
    deps = env.deps()
    sid = _session(deps)
    with deps.open_storage(sid) as storage:
        storage.commit([set_value(value("a"), 1)])
    counter.reset()
    with deps.open_storage(sid) as storage:
        envelope = read_ahead(deps, storage, values=[value("a"), value("absent")], head=True)
        assert envelope is not None
        assert envelope.owner_id == USER
        stored = storage.get_value(value("a"))
        assert stored is not None
        assert stored.value == 1
        assert storage.get_value(value("absent")) is None
        assert dict(counter.calls) == {"BatchGetItem": 1}


def test_a_commit_drops_what_it_wrote_from_what_was_read_ahead(env: Env) -> None:
    deps = env.deps()
    sid = _session(deps)
    with deps.open_storage(sid) as storage:
        read_ahead(deps, storage, values=[value("a")], head=True)
        assert storage.get_value(value("a")) is None
        storage.commit([set_value(value("a"), "written")])
        stored = storage.get_value(value("a"))
        assert stored is not None
        assert stored.value == "written"


def test_an_envelope_update_attached_to_a_commit_lands_with_it_in_one_request(
    env: Env, counter: RequestCounter
) -> None:
    deps = env.deps()
    sid = _session(deps)
    with deps.open_storage(sid) as storage:
        read_ahead(deps, storage, head=True)
        assert attachable(deps, storage)
        counter.reset()
        result = commit_with_envelope(
            deps,
            storage,
            [set_value(value("a"), 1)],
            guard=None,
            patch_for=lambda seqs: {"turnStreamCursor": seqs[-1]},
            expect={"turnStatus": [None]},
        )
        assert dict(counter.calls) == {"TransactWriteItems": 1}
    envelope = deps.envelopes.get(sid)
    assert envelope is not None
    assert envelope.meta["turnStreamCursor"] == result.seqs[-1]


def test_an_attached_envelope_condition_that_fails_writes_nothing_at_all(env: Env) -> None:
    deps = env.deps()
    sid = _session(deps)
    with deps.open_storage(sid) as storage:
        with pytest.raises(EnvelopeConflictError):
            commit_with_envelope(
                deps,
                storage,
                [set_value(value("a"), 1)],
                guard=None,
                patch_for=lambda seqs: {"turnStreamCursor": seqs[-1]},
                expect={"turnStatus": ["running"]},  # it is unset: the condition fails
            )
        assert storage.get_value(value("a")) is None
        assert storage.commit([set_value(value("b"), 2)]).seqs == (1,)  # none consumed
    envelope = deps.envelopes.get(sid)
    assert envelope is not None
    assert "turnStreamCursor" not in envelope.meta


def test_a_cancel_landing_after_the_finish_read_its_envelope_aborts_the_turn(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    deps = env.deps()
    sid = _session(deps)
    op = f"op-{uuid.uuid4().hex}"
    start_turn(deps, StartTurnInput(session_id=sid, op_id=op, user_id=USER, text="hi"))
    real = terminal.terminal_writes
    cancelled: list[str] = []

    def cancel_first(*args: Any, **kwargs: Any) -> Any:
        if not cancelled:  # between the finish's envelope read and its terminal commit
            cancelled.append(cancel_turn(deps, sid, op).status)
        return real(*args, **kwargs)

    monkeypatch.setattr(terminal, "terminal_writes", cancel_first)
    result = run_finish(deps, FinishTurnInput(session_id=sid, op_id=op))

    assert cancelled == ["cancelling"]  # the cancel was accepted, so it must take effect
    assert result.status == "aborted"
    with deps.open_storage(sid) as storage:
        record = load_record(storage, op)
    assert record is not None
    assert record.status == "aborted"
    envelope = deps.envelopes.get(sid)
    assert envelope is not None
    assert envelope.meta["turnStatus"] == "aborted"
