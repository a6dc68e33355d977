"""Launchers: what runs a started turn to its end (`start_turn` is already done).

- `LocalLauncher`: `resume_turn` on a bounded in-process thread pool (the local orchestrator),
  recorded as each turn's owner (`turnkeep.local_owner`) from launch to end.
- `StepFunctionsLauncher`: one Standard execution per turn, named by the operation id, with input
  ``{"session_id", "op_id", "round": 0}``; starting the same operation twice is a success.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Protocol

from turnkeep.harness import HarnessDeps, resume_turn
from turnkeep.local_owner import (
    TurnFinding,
    forget_owner,
    inspect_turn,
    record_owner,
    settle_ended,
)

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

logger = logging.getLogger("turnkeep.api.launch")

_EXECUTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


class LaunchError(Exception):
    """The turn could not be handed to its orchestrator; the API then fails the turn (503)."""


class Launcher(Protocol):
    """Hands a started turn to an orchestrator; returns once it is accepted (not finished)."""

    def launch(self, session_id: str, op_id: str) -> None:
        """Start driving `op_id`; idempotent for an operation already launched."""
        ...


class LocalLauncher:
    """Runs turns in this process on at most `workers` threads, `max_pending` accepted at once."""

    def __init__(self, deps: HarnessDeps, *, workers: int = 4, max_pending: int = 64) -> None:
        if workers < 1 or max_pending < 1:
            raise ValueError("workers and max_pending must be >= 1")
        self.deps = deps
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="turnkeep-turn")
        self._max_pending = max_pending
        self._lock = threading.Lock()
        self._active: dict[tuple[str, str], Future[None]] = {}
        self._closed = False

    def launch(self, session_id: str, op_id: str) -> None:
        """Queue `resume_turn`; an operation already queued or running is not queued twice."""
        key = (session_id, op_id)
        with self._lock:
            if self._closed:
                raise LaunchError("the local orchestrator is shut down")
            if key in self._active:
                return  # two drivers of one operation would run its steps concurrently
            if len(self._active) >= self._max_pending:
                raise LaunchError(
                    f"the local orchestrator already holds {self._max_pending} turns; "
                    "try again when one finishes"
                )
            # Recorded before the turn is queued, so another process opening the session sees
            # a live owner and leaves the turn alone.
            _record_owner(self.deps, session_id, op_id)
            future = self._pool.submit(self._run, session_id, op_id)
            self._active[key] = future

    def own(self, session_id: str, op_id: str) -> None:
        """Record this process as `op_id`'s owner before its `start_turn` claims the session, so
        a kill between the claim and `launch` leaves an orphan the next start-up resumes."""
        _record_owner(self.deps, session_id, op_id)

    def take_over(self, session_id: str) -> TurnFinding | None:
        """Deal with the session's running turn as its next opener (docs/local.md).

        An ended turn's envelope is repaired; a turn whose owner process is gone is launched
        here (resumed); a live or unknown owner's turn is left alone. Returns the finding.
        """
        finding = inspect_turn(self.deps, session_id)
        if finding is None:
            return None
        if finding.verdict == "ended":
            settle_ended(self.deps, finding)
        elif finding.verdict == "orphaned":
            self.launch(session_id, finding.op_id)
        return finding

    def _run(self, session_id: str, op_id: str) -> None:
        try:
            result = resume_turn(self.deps, session_id, op_id)
            logger.info("turn %s of %s ended: %s", op_id, session_id, result.status)
        except Exception:
            # resume_turn already ends the turn honestly when it can; this is what it could not.
            logger.exception("turn %s of session %s could not be driven", op_id, session_id)
        finally:
            with self._lock:
                self._active.pop((session_id, op_id), None)
            try:
                forget_owner(self.deps, session_id, op_id)
            except Exception:
                logger.exception("owner record of turn %s of %s not removed", op_id, session_id)

    def pending(self) -> int:
        """Turns queued or running now."""
        with self._lock:
            return len(self._active)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no turn is queued or running (True) or `timeout` seconds passed (False)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                futures = list(self._active.values())
            remaining = deadline - time.monotonic()
            if not futures:
                return True
            if remaining <= 0:
                return False
            wait(futures, timeout=remaining)

    def shutdown(self, *, wait: bool = True) -> None:
        """Refuse new launches; with `wait`, let queued and running turns finish."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=wait, cancel_futures=not wait)


def _record_owner(deps: HarnessDeps, session_id: str, op_id: str) -> None:
    storage = deps.open_storage(session_id)
    try:
        record_owner(storage, op_id)
    finally:
        storage.close()


class StepFunctionsLauncher:
    """Starts one execution of the turn state machine per operation (name = operation id)."""

    def __init__(self, client: SFNClient, state_machine_arn: str) -> None:
        if not state_machine_arn:
            raise ValueError("StepFunctionsLauncher needs a state machine ARN")
        self.client = client
        self.state_machine_arn = state_machine_arn

    def launch(self, session_id: str, op_id: str) -> None:
        """`StartExecution`; an execution that already exists for this operation is success."""
        if not _EXECUTION_NAME.match(op_id):
            raise LaunchError(
                f"operation id {op_id!r} is not a valid execution name "
                "(1-80 characters of A-Z a-z 0-9 _ -)"
            )
        payload = json.dumps({"session_id": session_id, "op_id": op_id, "round": 0})
        try:
            self.client.start_execution(
                stateMachineArn=self.state_machine_arn, name=op_id, input=payload
            )
        except self.client.exceptions.ExecutionAlreadyExists:
            logger.info("execution %s already exists; the turn is already launched", op_id)
