"""Launchers: what runs a started turn to its end (`start_turn` is already done).

- `LocalLauncher`: `resume_turn` on a bounded in-process thread pool (the local orchestrator),
  recorded as each turn's owner (`turnkeep.harness.local_owner`) from launch to end.
- `StepFunctionsLauncher`: one Standard execution per turn, named by the operation id, with input
  ``{"session_id", "op_id", "round": 0}``; starting the same operation twice is a success.
"""

from __future__ import annotations

import heapq
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Protocol

from turnkeep.harness import HarnessDeps, resume_turn
from turnkeep.harness.local_owner import (
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
        self._again: set[tuple[str, str]] = set()
        self._closed = False
        # One thread for every turn waiting for a person: it re-launches a turn when its
        # approval request times out (the decision itself re-launches it sooner).
        self._timers = ApprovalTimers(self._timed_out)

    def launch(self, session_id: str, op_id: str) -> None:
        """Queue `resume_turn`; an operation already queued or running is not queued twice."""
        key = (session_id, op_id)
        with self._lock:
            if self._closed:
                raise LaunchError("the local orchestrator is shut down")
            if key in self._active:
                # Two drivers of one operation would run its steps concurrently: the running
                # one drives it once more when it is done (it may have just paused, missing
                # the approval decision that asked for this launch).
                self._again.add(key)
                return
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
        key = (session_id, op_id)
        try:
            while True:
                self._drive_once(session_id, op_id)
                with self._lock:
                    if key not in self._again:
                        self._active.pop(key, None)
                        break
                    self._again.discard(key)
        finally:
            with self._lock:
                self._active.pop(key, None)
            try:
                forget_owner(self.deps, session_id, op_id)
            except Exception:
                logger.exception("owner record of turn %s of %s not removed", op_id, session_id)

    def _drive_once(self, session_id: str, op_id: str) -> None:
        try:
            result = resume_turn(self.deps, session_id, op_id)
            logger.info("turn %s of %s: %s", op_id, session_id, result.status)
            if result.status == "awaiting_approval":
                self._timers.schedule(
                    time.monotonic() + (result.approval_wait_seconds or 1), session_id, op_id
                )
        except Exception:
            # resume_turn already ends the turn honestly when it can; this is what it could not.
            logger.exception("turn %s of session %s could not be driven", op_id, session_id)

    def _timed_out(self, session_id: str, op_id: str) -> None:
        try:
            self.launch(session_id, op_id)
        except LaunchError as exc:
            logger.warning(
                "turn %s of %s: approval timeout not applied: %s", op_id, session_id, exc
            )

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
        self._timers.stop()
        self._pool.shutdown(wait=wait, cancel_futures=not wait)


class ApprovalTimers:
    """Deadlines of paused turns on one daemon thread (started on first use): at each deadline
    `fire(session_id, op_id)` runs. Not durable: start-up re-launches waiting turns, which
    schedules their deadlines again (`turnkeep.api.serve.resume_unfinished`)."""

    def __init__(self, fire: Callable[[str, str], None]) -> None:
        self._fire = fire
        self._heap: list[tuple[float, str, str]] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def schedule(self, when: float, session_id: str, op_id: str) -> None:
        """Run `fire` at monotonic time `when` (a turn scheduled twice fires twice: harmless,
        a re-launch of a turn that is not due just pauses it again)."""
        with self._cond:
            if self._stopped:
                return
            heapq.heappush(self._heap, (when, session_id, op_id))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="turnkeep-approval-timers", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def stop(self) -> None:
        """Fire nothing more."""
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                _, session_id, op_id = heapq.heappop(self._heap)
            self._fire(session_id, op_id)


def _record_owner(deps: HarnessDeps, session_id: str, op_id: str) -> None:
    storage = deps.open_storage(session_id)
    try:
        record_owner(storage, op_id)
    finally:
        storage.close()


class StepFunctionsLauncher:
    """Starts one execution of the turn state machine per operation (name = operation id)."""

    def __init__(
        self,
        client: SFNClient | None,
        state_machine_arn: str,
        *,
        client_factory: Callable[[], SFNClient] | None = None,
    ) -> None:
        """`client`, or `client_factory` to build it on the first launch: building a client
        costs ~0.1-0.25 s, which a cold API container serving no turn start never needs."""
        if not state_machine_arn:
            raise ValueError("StepFunctionsLauncher needs a state machine ARN")
        if (client is None) == (client_factory is None):
            raise ValueError("StepFunctionsLauncher needs exactly one of client, client_factory")
        self._client = client
        self._client_factory = client_factory
        self._client_lock = threading.Lock()
        self.state_machine_arn = state_machine_arn

    @property
    def client(self) -> SFNClient:
        """The Step Functions client (built by the factory on first use)."""
        with self._client_lock:
            if self._client is None:
                assert self._client_factory is not None  # checked in __init__
                self._client = self._client_factory()
            return self._client

    def launch(self, session_id: str, op_id: str) -> None:
        """`StartExecution`; an execution that already exists for this operation is success."""
        if not _EXECUTION_NAME.match(op_id):
            raise LaunchError(
                f"operation id {op_id!r} is not a valid execution name "
                "(1-80 characters of A-Z a-z 0-9 _ -)"
            )
        payload = json.dumps({"session_id": session_id, "op_id": op_id, "round": 0})
        client = self.client
        try:
            client.start_execution(
                stateMachineArn=self.state_machine_arn, name=op_id, input=payload
            )
        except client.exceptions.ExecutionAlreadyExists:
            logger.info("execution %s already exists; the turn is already launched", op_id)

    def release(self, tokens: list[str]) -> None:
        """End the approval waits of `tokens` (`SendTaskSuccess`): the execution's tool step
        then applies the recorded decision (or finds the turn ended). A wait that already
        ended (the wait step released itself, a timeout) is not an error."""
        for token in tokens:
            try:
                self.client.send_task_success(taskToken=token, output="{}")
            except (
                self.client.exceptions.InvalidToken,
                self.client.exceptions.TaskDoesNotExist,
                self.client.exceptions.TaskTimedOut,
            ) as exc:
                logger.info("approval wait already over: %s", type(exc).__name__)
