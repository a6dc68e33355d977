"""A crash after every single storage call of a turn with tool calls, then recovery as the
deployment recovers; after each, the turn ended and every invariant holds.

The turn: two parallel tool calls, then a working-notes write, then the final reply
(`tests.support.reliability.TURN_TEXT`). Call hooks and recovery paths: see that module.
CI runs the SQLite matrix; `TURNKEEP_RELIABILITY=full` adds JSONL and AWS (moto).

Found by this matrix: issue #9 bug 1 (before 917c6ee, a crash after the terminal commit left
the envelope `running` for an ended turn: SQLite call 43, JSONL call 46 of 45/47) and a claimed
turn with no storage commit yet that SQLite start-up recovery never saw (SQLite call 1); after
the local turn owners landed, a kill between the API's `start_turn` and the launcher's owner
record (SQLite calls 1-3, JSONL 2-4) left an ownerless turn running (the owner is now recorded
first).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.conftest import FULL
from tests.support.reliability import (
    AwsDeployment,
    Deployment,
    LocalDeployment,
    PointResult,
    check_turn,
    crash_matrix,
    run_local,
    run_steps,
)

BACKENDS = ["sqlite", "jsonl", "aws"] if FULL else ["sqlite"]


@pytest.fixture(scope="module", params=BACKENDS)
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    if request.param == "aws":
        from moto import mock_aws

        with mock_aws():
            yield AwsDeployment.create()
    else:
        root: Path = tmp_path_factory.mktemp(request.param)
        yield LocalDeployment(request.param, root)


@pytest.fixture(scope="module")
def matrix(deployment: Deployment) -> list[PointResult]:
    return crash_matrix(deployment)


def test_the_turn_without_a_crash_holds_every_invariant(deployment: Deployment) -> None:
    run = (
        run_local(deployment, None)
        if isinstance(deployment, LocalDeployment)
        else (run_steps(deployment, None))
    )

    assert run.crash is None
    assert check_turn(deployment, run) == []


def test_a_crash_after_any_storage_call_leaves_the_turn_ended_and_consistent(
    matrix: list[PointResult],
) -> None:
    broken = [r for r in matrix if r.problems]

    assert len(matrix) > 20  # every call of every step: the matrix is not trivially small
    assert all(r.crash is not None for r in matrix)
    assert broken == []


def test_every_step_delivered_twice_has_its_effects_once(deployment: Deployment) -> None:
    run = run_steps(deployment, None, deliveries=2)  # each delivery pair answers the same

    assert run.invocations  # the steps ran
    assert check_turn(deployment, run) == []


def test_a_turn_claimed_but_never_committed_is_ended_by_the_next_server_start(
    tmp_path: Path,
) -> None:
    deployment = LocalDeployment("sqlite", tmp_path)
    run_local(deployment, None)  # creates the schemas, so the calls below are the turn's

    run = run_local(deployment, 2)  # call 1 records the owner; dies right after call 2, the claim

    assert run.crash == "sqlite COMMIT"
    assert check_turn(deployment, run) == []
    store = deployment.envelopes()
    envelope = store.get(run.session_id)
    store.close()
    assert envelope is not None
    assert envelope.meta["turnStatus"] == "failed"
