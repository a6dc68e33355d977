"""How a turn begins (`turnkeep.harness.begin_turn`): one commit where the stores share a
table, else in steps; a busy session is refused; a local owner is told first and may take over
a turn whose process is gone."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import boto3
import pytest
from moto import mock_aws

from tests.support.aws_template import create_bucket, create_table
from turnkeep.envelope import Envelope, open_envelope_store, turn_run_id, turn_status
from turnkeep.envelope.dynamodb import DynamoEnvelopeStore
from turnkeep.harness import (
    HarnessDeps,
    SessionBusyError,
    StartSlot,
    StartTurnInput,
    begin_turn,
)
from turnkeep.harness.local_owner import TurnFinding
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import open_storage
from turnkeep.storage.aws import AwsRepository
from turnkeep.turn_rules import DELETE_MARKER


class RecordingGate:
    """A start gate with an unlimited window that records which way a slot was taken."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def slot(self, meta: Mapping[str, object]) -> StartSlot:
        self.calls.append("slot")
        return StartSlot({"turnRateWindowCount": 1}, {"turnRateWindowCount": [None]})

    def reserve(self, envelope: Envelope) -> None:
        self.calls.append("reserve")


class RecordingOwner:
    """A local turn owner: records `own` with the envelope status it saw at that moment."""

    def __init__(self, deps: HarnessDeps, verdict: str | None = None) -> None:
        self.deps = deps
        self.verdict = verdict
        self.owned: list[tuple[str, str, str | None]] = []
        self.take_overs: list[str] = []

    def launch(self, session_id: str, op_id: str) -> None:  # a launcher, like LocalLauncher
        pass

    def own(self, session_id: str, op_id: str) -> None:
        envelope = self.deps.envelopes.get(session_id)
        status = turn_status(envelope.meta) if envelope is not None else None
        self.owned.append((session_id, op_id, status))

    def take_over(self, session_id: str) -> TurnFinding | None:
        self.take_overs.append(session_id)
        if self.verdict is None:
            return None
        if self.verdict == "ended":
            # What the local owner's repair leaves: the envelope no longer says running.
            self.deps.envelopes.update_worker_meta(session_id, {"turnStatus": "completed"})
        return TurnFinding(session_id, "old", self.verdict, False, None)  # type: ignore[arg-type]


@pytest.fixture
def memory_deps() -> tuple[HarnessDeps, str]:
    url = f"memory://{uuid.uuid4().hex}"
    envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
    envelopes.create("s1", "u1")
    return (
        HarnessDeps(
            open_storage=lambda sid: open_storage(url, sid),
            envelopes=envelopes,
            provider=ScriptedProvider(),
        ),
        url,
    )


def _inp(op_id: str = "op1") -> StartTurnInput:
    return StartTurnInput(session_id="s1", op_id=op_id, user_id="u1", text="hi")


def _begin(deps: HarnessDeps, url: str, gate: RecordingGate, launcher: object) -> None:
    envelope = deps.envelopes.get("s1")
    assert envelope is not None
    with open_storage(url, "s1") as storage:
        begin_turn(deps, storage, _inp(), envelope, gate=gate, launcher=launcher)


def test_a_free_session_on_separate_stores_begins_in_steps_and_takes_a_slot_first(
    memory_deps: tuple[HarnessDeps, str],
) -> None:
    deps, url = memory_deps
    gate = RecordingGate()

    _begin(deps, url, gate, launcher=object())

    assert gate.calls == ["reserve"]
    envelope = deps.envelopes.get("s1")
    assert envelope is not None
    assert (turn_status(envelope.meta), turn_run_id(envelope.meta)) == ("running", "op1")
    with open_storage(url, "s1") as storage:
        assert storage.get_stats().entry_count == 1


@mock_aws
def test_a_free_session_whose_stores_share_a_dynamodb_table_begins_in_one_commit() -> None:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    s3 = boto3.client("s3", region_name="us-east-1")
    create_table(ddb, "begin")
    create_bucket(s3, "begin-bucket")
    repository = AwsRepository("begin", "begin-bucket", "a", dynamodb_client=ddb, s3_client=s3)
    envelopes = DynamoEnvelopeStore(ddb, "begin")
    envelopes.create("s1", "u1")
    deps = HarnessDeps(
        open_storage=repository.open, envelopes=envelopes, provider=ScriptedProvider()
    )
    gate = RecordingGate()

    envelope = envelopes.get("s1")
    assert envelope is not None
    with repository.open("s1") as storage:
        begin_turn(deps, storage, _inp(), envelope, gate=gate, launcher=object())

    assert gate.calls == ["slot"]
    envelope = envelopes.get("s1")
    assert envelope is not None
    assert (turn_status(envelope.meta), turn_run_id(envelope.meta)) == ("running", "op1")
    assert envelope.meta["turnRateWindowCount"] == 1


def test_a_local_owner_is_told_before_the_claim(memory_deps: tuple[HarnessDeps, str]) -> None:
    deps, url = memory_deps
    owner = RecordingOwner(deps)

    _begin(deps, url, RecordingGate(), launcher=owner)

    assert owner.owned == [("s1", "op1", None)]


def test_a_busy_session_is_refused_naming_the_running_turn_and_takes_no_slot(
    memory_deps: tuple[HarnessDeps, str],
) -> None:
    deps, url = memory_deps
    deps.envelopes.update_worker_meta("s1", {"turnStatus": "awaiting_approval", "turnRunId": "old"})
    gate = RecordingGate()

    with pytest.raises(SessionBusyError, match="runs turn 'old' \\(waiting for an approval"):
        _begin(deps, url, gate, launcher=object())

    assert gate.calls == []


def test_a_session_being_deleted_is_refused_without_asking_the_owner(
    memory_deps: tuple[HarnessDeps, str],
) -> None:
    deps, url = memory_deps
    deps.envelopes.update_worker_meta("s1", {"turnStatus": "running", "turnRunId": DELETE_MARKER})
    owner = RecordingOwner(deps, verdict="ended")

    with pytest.raises(SessionBusyError, match="is being deleted"):
        _begin(deps, url, RecordingGate(), launcher=owner)

    assert owner.take_overs == []


def test_an_orphaned_local_turn_is_resumed_and_the_start_still_refused(
    memory_deps: tuple[HarnessDeps, str],
) -> None:
    deps, url = memory_deps
    deps.envelopes.update_worker_meta("s1", {"turnStatus": "running", "turnRunId": "old"})
    owner = RecordingOwner(deps, verdict="orphaned")

    with pytest.raises(SessionBusyError, match="resumed now"):
        _begin(deps, url, RecordingGate(), launcher=owner)

    assert owner.take_overs == ["s1"]


def test_a_local_turn_found_ended_lets_the_new_turn_begin(
    memory_deps: tuple[HarnessDeps, str],
) -> None:
    deps, url = memory_deps
    deps.envelopes.update_worker_meta("s1", {"turnStatus": "running", "turnRunId": "old"})
    owner = RecordingOwner(deps, verdict="ended")
    gate = RecordingGate()

    _begin(deps, url, gate, launcher=owner)

    assert gate.calls == ["reserve"]
    envelope = deps.envelopes.get("s1")
    assert envelope is not None
    assert (turn_status(envelope.meta), turn_run_id(envelope.meta)) == ("running", "op1")
