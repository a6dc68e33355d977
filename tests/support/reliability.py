"""The crash-point matrix of one turn on one deployment, and the invariants checked after each.

A *deployment* builds the deps of one simulated process whose storage and envelope calls report
to a `CrashPlan` (`tests.support.crash_points`). Two ways a deployment recovers:

- local (SQLite, JSONL; envelopes in SQLite as the local server keeps them): the whole turn runs
  in one process (`start_turn` as the API does, then `resume_turn` as the `LocalLauncher` does).
  A crash kills the process; the restart runs the server's real start-up recovery
  (`turnkeep.api.serve.resume_unfinished` on a `LocalLauncher`), then the session is opened
  once more (the next open: JSONL repairs and unlinks leftovers).
- aws (DynamoDB + S3 under moto): each step is one invocation of its real Lambda handler
  (`functions/turn_steps/app.py`, called in-process with a fake context) on the JSON payload the
  state machine sends, in its order (model → parallel tool calls → model … → finish/fail; Retry
  and Catch as `statemachine/turn.asl.json` says). A container is the handler module imported
  anew with a runtime on hooked deps (`turnkeep.aws_lambda.container.install_runtime`). A crash
  kills that invocation; Step Functions delivers the same payload to a fresh container.
  `start_turn` runs in the API function, which nothing retries: a crash there is recovered by
  the session's next `start_turn` once the turn is past its deadline plus `stale_turn_seconds`
  (the abandoned-turn takeover), which a fake clock reaches at once.

Tool steps of one round run one after another (`tool_parallelism=1`) so the n-th call is the
same call in every run and a crash point is reproducible.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from tests.support.crash_points import (
    CrashPlan,
    ProcessDeath,
    RecordingStorage,
    active,
    hook_aws_client,
    jsonl_hooks,
    sqlite_hooks,
    watch_notes,
)
from turnkeep.aws_lambda.step_events import StepName, run_step
from turnkeep.envelope import EnvelopeStore
from turnkeep.envelope.sqlite import SqliteEnvelopeStore
from turnkeep.harness import (
    HarnessDeps,
    HarnessLimits,
    StartTurnInput,
    resume_turn,
    start_turn,
)
from turnkeep.harness.state import (
    CALL_NS,
    CHECKPOINT_NS,
    HEAD_NS,
    MEMO_NS,
    OP_NS,
    RESULT_NS,
    frames_address,
    load_head,
    load_record,
    load_state,
    op_scope,
    response_id,
)
from turnkeep.harness.transcript import branch_messages
from turnkeep.providers.base import ToolCallPart, ToolResultPart, check_transcript
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import Runtime
from turnkeep.runtime.settings import TurnkeepSettings
from turnkeep.storage import Storage, open_storage, set_value, value
from turnkeep.storage import jsonl_sidecars as jsonl_files

USER = "user-r"
NOTES_BEFORE = "notes from an earlier turn"
NOTES_AFTER = "notes the turn wrote"
TURN_TEXT = (
    'call calculator {"expression": "6*7"}\n'
    'call echo {"text": "in parallel"}\n'
    "then\n"
    f'call working_notes_update {{"notes": "{NOTES_AFTER}"}}'
)
"""Round 0: two parallel tool calls; round 1: a notes write; round 2: the final reply."""

ENDED = ("completed", "failed", "aborted")
LIMITS = HarnessLimits(tool_parallelism=1, frame_interval_ms=0)
"""Every streamed delta is its own frame append: crash points fall mid-stream too."""


class FakeClock:
    """Wall-clock seconds that move only when told (the abandoned-turn takeover needs time)."""

    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


class Deployment(Protocol):
    """Where a turn runs: fresh processes with hooked calls, and clean handles for checks."""

    name: str
    plan: CrashPlan
    clock: FakeClock

    def process(self) -> HarnessDeps:
        """The deps of a freshly started process (its calls report to `plan`)."""
        ...

    def container(self) -> StepContainer:
        """A freshly started container of the step functions (its calls report to `plan`)."""
        ...

    def envelopes(self) -> EnvelopeStore:
        """A clean envelope store handle (for setup and checks)."""
        ...

    def storage(self, session_id: str) -> Storage:
        """A clean storage handle of the session (a new process's open)."""
        ...

    def scope_leftovers(self, session_id: str) -> list[str]:
        """Physically stored ephemeral state of the session (rows, sidecars, S3 objects)."""
        ...

    def hooks(self) -> Any:
        """A context manager installing this deployment's call hooks."""
        ...


# -- local deployments ----------------------------------------------------------------------


@dataclass
class LocalDeployment:
    """The local server's wiring: SQLite or JSONL storage, SQLite envelopes."""

    name: str
    root: Path
    plan: CrashPlan = field(default_factory=CrashPlan)
    clock: FakeClock = field(default_factory=FakeClock)

    @property
    def storage_url(self) -> str:
        if self.name == "sqlite":
            return f"sqlite:///{self.root / 'turnkeep.db'}"
        return f"jsonl:///{self.root / 'jsonl'}"

    @property
    def envelope_path(self) -> str:
        return str(self.root / "turnkeep.db")

    def hooks(self) -> Any:
        stack = ExitStack()
        stack.enter_context(sqlite_hooks())
        if self.name == "jsonl":
            stack.enter_context(jsonl_hooks())
        return stack

    def process(self) -> HarnessDeps:
        url, plan = self.storage_url, self.plan
        return HarnessDeps(
            open_storage=lambda session_id: RecordingStorage(open_storage(url, session_id), plan),
            envelopes=watch_notes(SqliteEnvelopeStore(self.envelope_path), self.plan),
            provider=ScriptedProvider(),
            clock=self.clock,
            limits=LIMITS,
        )

    def container(self) -> StepContainer:
        return HarnessContainer(self.process())

    def envelopes(self) -> EnvelopeStore:
        return SqliteEnvelopeStore(self.envelope_path)

    def storage(self, session_id: str) -> Storage:
        return open_storage(self.storage_url, session_id)

    def scope_leftovers(self, session_id: str) -> list[str]:
        if self.name == "sqlite":
            with sqlite3.connect(self.root / "turnkeep.db") as conn:
                rows = conn.execute(
                    "SELECT scope_id, namespace, key FROM scalar_values "
                    "WHERE session_id = ? AND scope_id != '' UNION ALL "
                    "SELECT scope_id, namespace, key FROM list_values "
                    "WHERE session_id = ? AND scope_id != ''",
                    (session_id, session_id),
                ).fetchall()
            return [f"row {r}" for r in rows]
        main = jsonl_files.main_path(str(self.root / "jsonl"), session_id)
        scopes = Path(jsonl_files.scopes_dir(main))
        return [f"file {p.name}" for p in scopes.iterdir()] if scopes.exists() else []


def recover_local(deployment: LocalDeployment) -> list[str]:
    """A server restart: the real start-up recovery drives every turn left running to its end."""
    from turnkeep.api.launch import LocalLauncher
    from turnkeep.api.serve import resume_unfinished

    deployment.plan.arm(None)
    deps = deployment.process()
    runtime = Runtime(
        TurnkeepSettings(storage_url=deployment.storage_url, envelope_url="unused"),
        deps,
        deps.envelopes,
        deployment.storage_url,
    )
    launcher = LocalLauncher(deps, workers=1)
    try:
        resumed = resume_unfinished(runtime, launcher)
        if not launcher.wait_idle(60):
            raise AssertionError("start-up recovery did not finish within 60 s")
    finally:
        launcher.shutdown()
        runtime.close()
    return resumed


# -- the AWS deployment ---------------------------------------------------------------------

TABLE, BUCKET, PREFIX = "reliability", "reliability-bucket", "rel"


@dataclass
class AwsDeployment:
    """DynamoDB + S3 (moto) storage and DynamoDB envelopes, as the step Lambdas use them."""

    ddb: Any
    s3: Any
    clean_ddb: Any
    clean_s3: Any
    name: str = "aws"
    plan: CrashPlan = field(default_factory=CrashPlan)
    clock: FakeClock = field(default_factory=FakeClock)

    @classmethod
    def create(cls, region: str = "us-east-1") -> AwsDeployment:
        """Clients (hooked and clean), table and bucket; call inside `moto.mock_aws()`."""
        import boto3

        from tests.support.aws_template import create_bucket, create_table

        session = boto3.session.Session(region_name=region)
        ddb, s3 = session.client("dynamodb"), session.client("s3")
        create_table(ddb, TABLE)
        create_bucket(s3, BUCKET)
        hooked = cls(
            ddb=session.client("dynamodb"),
            s3=session.client("s3"),
            clean_ddb=ddb,
            clean_s3=s3,
        )
        hook_aws_client(hooked.ddb)
        hook_aws_client(hooked.s3)
        return hooked

    @contextmanager
    def hooks(self) -> Iterator[None]:
        """The hooked clients report by themselves; the handlers' runtime is put back after."""
        from turnkeep.aws_lambda import container

        previous = container.install_runtime(None)
        try:
            yield
        finally:
            container.install_runtime(previous)

    def repository(self, *, clean: bool = False) -> Any:
        from turnkeep.storage.aws import AwsRepository

        ddb, s3 = (self.clean_ddb, self.clean_s3) if clean else (self.ddb, self.s3)
        return AwsRepository(TABLE, BUCKET, PREFIX, dynamodb_client=ddb, s3_client=s3)

    def process(self) -> HarnessDeps:
        from turnkeep.envelope.dynamodb import DynamoEnvelopeStore

        repository, plan = self.repository(), self.plan
        return HarnessDeps(
            open_storage=lambda session_id: RecordingStorage(repository.open(session_id), plan),
            envelopes=watch_notes(DynamoEnvelopeStore(self.ddb, TABLE), self.plan),
            provider=ScriptedProvider(),
            clock=self.clock,
            limits=LIMITS,
        )

    def container(self) -> StepContainer:
        """A cold Lambda container: the handler module imported anew, a runtime on new deps."""
        from tests.support.lambda_host import load_function_module

        deps = self.process()
        settings = TurnkeepSettings(
            storage_url=f"aws://?table={TABLE}&bucket={BUCKET}&prefix={PREFIX}",
            envelope_url=f"aws://?table={TABLE}",
        )
        runtime = Runtime(settings, deps, deps.envelopes, settings.storage_url)
        return LambdaContainer(load_function_module("turn_steps"), runtime)

    def envelopes(self) -> EnvelopeStore:
        from turnkeep.envelope.dynamodb import DynamoEnvelopeStore

        return DynamoEnvelopeStore(self.clean_ddb, TABLE)

    def storage(self, session_id: str) -> Storage:
        storage: Storage = self.repository(clean=True).open(session_id)
        return storage

    def forget(self, session_id: str) -> None:
        """Drop a checked session by recreating the table: moto copies the whole table on every
        transaction (and keeps copies alive), so a table holding every earlier crash point's
        session makes each point slower and bigger than the last."""
        from tests.support.aws_template import create_table

        self.repository(clean=True).delete_session(session_id)  # its S3 objects
        self.clean_ddb.delete_table(TableName=TABLE)
        create_table(self.clean_ddb, TABLE)

    def scope_leftovers(self, session_id: str) -> list[str]:
        paginator = self.clean_s3.get_paginator("list_objects_v2")
        keys = []
        for page in paginator.paginate(Bucket=BUCKET, Prefix=f"{PREFIX}/sessions/{session_id}/"):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        return [f"object {k}" for k in keys]


# -- one turn, crashed and recovered --------------------------------------------------------


@dataclass
class TurnRun:
    """What one run of the turn did: its session, operation and the crash it survived."""

    session_id: str
    op_id: str
    crash: str | None = None
    """The call after which the process died (None: no crash)."""
    takeover_op: str | None = None
    """AWS: the later turn that took over a turn abandoned by a crashed API call."""
    invocations: list[int] = field(default_factory=list)
    """Calls made by each invocation (the AWS driver; one entry for a local process)."""


def new_session(deployment: Deployment) -> str:
    """A session with an envelope and earlier working notes (written without hooks)."""
    session_id = f"s-{uuid.uuid4().hex[:12]}"
    deployment.plan.arm(None)
    store = deployment.envelopes()
    try:
        store.create(session_id, USER)
        store.update_worker_meta(session_id, {"workingNotes": NOTES_BEFORE}, owner_id=USER)
    finally:
        store.close()
    deployment.plan.notes_written = NOTES_BEFORE
    deployment.plan.seqs = []
    return session_id


def dead_owner() -> Any:
    """A local turn owner whose process has exited (the simulated process that dies)."""
    import socket
    import subprocess
    import sys

    from turnkeep.harness.local_owner import Owner

    global _DEAD_PID
    if _DEAD_PID is None:
        exited = subprocess.Popen([sys.executable, "-c", "pass"])
        exited.wait()
        _DEAD_PID = exited.pid
    # process_start never matches a live process, so even a reused pid reads as gone.
    return Owner(pid=_DEAD_PID, host=socket.gethostname(), process_start="exited")


_DEAD_PID: int | None = None


def _own(deps: HarnessDeps, session_id: str, op_id: str) -> None:
    from turnkeep.harness.local_owner import record_owner

    storage = deps.open_storage(session_id)
    try:
        record_owner(storage, op_id, dead_owner())
    finally:
        storage.close()


def run_local(deployment: LocalDeployment, crash_after: int | None) -> TurnRun:
    """The turn in one local process dying after call `crash_after`, then a server restart.

    The process does what the API's turn start does: records itself as the turn's owner
    (`LocalLauncher.own`), `start_turn`, `LocalLauncher.launch` (records the owner again), then
    `resume_turn`. The dying process's owner record names an exited process, as it would after
    a real kill."""

    session_id = new_session(deployment)
    run = TurnRun(session_id, f"op-{uuid.uuid4().hex[:12]}")
    plan = deployment.plan
    with deployment.hooks(), active(plan):
        plan.arm(crash_after)
        deps = deployment.process()
        try:
            _own(deps, session_id, run.op_id)  # LocalLauncher.own
            start_turn(
                deps,
                StartTurnInput(
                    session_id=session_id, op_id=run.op_id, user_id=USER, text=TURN_TEXT
                ),
            )
            _own(deps, session_id, run.op_id)  # LocalLauncher.launch
            resume_turn(deps, session_id, run.op_id)
        except ProcessDeath:
            run.crash = plan.calls[-1] if plan.calls else "?"
        run.invocations.append(len(plan.calls))
        recover_local(deployment)
        plan.arm(None)
        deployment.storage(session_id).close()  # the next open
    return run


# -- the state machine's path, through the step handlers -------------------------------------

ASL = Path(__file__).resolve().parents[2] / "statemachine" / "turn.asl.json"

TASKS: dict[str, StepName] = {
    "ModelStep": "model_step",
    "ToolStep": "tool_step",
    "FinishTurn": "finish_turn",
    "FailTurnFromModel": "fail_turn",
    "FailTurn": "fail_turn",
}
"""The turn state machine's Task states and the step function each one invokes."""


class TaskFailed(Exception):
    """A Task's error once its Retry gave up: what the state's Catch puts at `$.caught`."""

    def __init__(self, caught: dict[str, str]) -> None:
        super().__init__(caught["Error"])
        self.caught = caught


def caught_error(exc: Exception) -> dict[str, str]:
    """The Catch's `$.caught` for a handler that raised `exc` (Lambda's error body as Cause)."""
    name = type(exc).__name__
    body = {"errorMessage": str(exc), "errorType": name, "stackTrace": []}
    return {"Error": name, "Cause": json.dumps(body)}


@functools.cache
def task_retriers() -> dict[str, tuple[tuple[frozenset[str], int], ...]]:
    """Each Task state's Retry of the STANDARD definition: (error names, MaxAttempts) in order."""
    found: dict[str, tuple[tuple[frozenset[str], int], ...]] = {}

    def walk(states: dict[str, Any]) -> None:
        for name, state in states.items():
            if "Retry" in state:
                found[name] = tuple(
                    (frozenset(r["ErrorEquals"]), int(r.get("MaxAttempts", 3)))
                    for r in state["Retry"]
                )
            processor = state.get("ItemProcessor")
            if processor is not None:
                walk(processor["States"])

    walk(json.loads(ASL.read_text(encoding="utf-8"))["States"])
    return found


def _retrier(state: str, exc: Exception, used: Counter[int]) -> int | None:
    """The index of the retrier of `state` that retries `exc` once more (None: it is caught)."""
    for index, (errors, attempts) in enumerate(task_retriers().get(state, ())):
        if type(exc).__name__ in errors or "States.ALL" in errors:
            return index if used[index] < attempts else None
    return None


class StepContainer(Protocol):
    """One container of the step functions: takes a task payload, answers the step's output."""

    def invoke(self, step: StepName, payload: dict[str, Any]) -> dict[str, Any]:
        """Deliver `payload` to `step` (raises what the step raised)."""
        ...


@dataclass
class HarnessContainer:
    """A local process: the payload goes to `run_step`, the core every step handler wraps."""

    deps: HarnessDeps

    def invoke(self, step: StepName, payload: dict[str, Any]) -> dict[str, Any]:
        return run_step(step, self.deps, payload)


@dataclass
class LambdaContainer:
    """A Lambda container of the step functions: `functions/turn_steps/app.py` loaded anew, its
    runtime built on the deployment's hooked deps (installed while it runs a handler)."""

    module: ModuleType
    runtime: Runtime

    def invoke(self, step: StepName, payload: dict[str, Any]) -> dict[str, Any]:
        from tests.support.lambda_host import FakeContext
        from turnkeep.aws_lambda import container

        container.install_runtime(self.runtime)  # one container runs at a time
        handler = getattr(self.module, step)
        # Payload and answer cross Step Functions as JSON.
        output = handler(json.loads(json.dumps(payload)), FakeContext(function_name=step))
        answer: dict[str, Any] = json.loads(json.dumps(output))
        return answer


@dataclass
class _Execution:
    """One execution of the turn's state machine; its Tasks go to the deployment's containers.

    Invocation `crash_at[0]` (0-based, the API's `start_turn` is 0) dies after its call
    `crash_at[1]`; Step Functions then delivers the same payload to a fresh container."""

    deployment: Deployment
    run: TurnRun
    crash_at: tuple[int, int] | None
    deliveries: int
    container: StepContainer

    def target(self) -> int | None:
        """The call after which the next invocation dies (None: it does not)."""
        index = len(self.run.invocations)
        if self.crash_at is not None and self.crash_at[0] == index:
            return self.crash_at[1]
        return None

    def task(self, state: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Run Task `state` on `payload`; `deliveries=2` delivers it twice (the same answer)."""
        index, target = len(self.run.invocations), self.target()
        outputs = [
            self._deliver(state, payload, index, target if delivery == 0 else None)
            for delivery in range(self.deliveries)
        ]
        if any(output != outputs[0] for output in outputs):
            raise AssertionError(f"a duplicate delivery answered differently: {outputs}")
        return outputs[0]

    def _deliver(
        self, state: str, payload: dict[str, Any], index: int, crash_after: int | None
    ) -> dict[str, Any]:
        """One delivery until it answers: Step Functions' Retry of a raised error (the same warm
        container) and, after a crash, the same payload to a fresh container."""
        plan = self.deployment.plan
        plan.arm(crash_after)
        counted = len(self.run.invocations) > index  # a duplicate delivery: already counted
        used: Counter[int] = Counter()
        while True:
            try:
                output = self.container.invoke(TASKS[state], payload)
            except ProcessDeath:
                self.run.crash = f"invocation {index}: {plan.calls[-1] if plan.calls else '?'}"
                counted = counted or self._count()
                plan.arm(None)
                self.container = self.deployment.container()
                continue
            except Exception as exc:
                counted = counted or self._count()
                retrier = _retrier(state, exc, used)
                if retrier is None:
                    raise TaskFailed(caught_error(exc)) from exc
                used[retrier] += 1
                continue
            counted = counted or self._count()
            return output

    def _count(self) -> bool:
        self.run.invocations.append(len(self.deployment.plan.calls))
        return True


def run_steps(
    deployment: Deployment,
    crash_at: tuple[int, int] | None,
    *,
    deliveries: int = 1,
) -> TurnRun:
    """The turn driven as the state machine drives it: the API's `start_turn` (invocation 0),
    then every Task's JSON payload to the step functions (on AWS the Lambda handlers).

    Invocation `crash_at[0]` dies after its call `crash_at[1]` and is retried with the same
    payload. `deliveries=2` delivers every step twice (a duplicate delivery) and checks both
    answer the same."""
    session_id = new_session(deployment)
    run = TurnRun(session_id, f"op-{uuid.uuid4().hex[:12]}")
    plan = deployment.plan
    start = StartTurnInput(session_id=session_id, op_id=run.op_id, user_id=USER, text=TURN_TEXT)
    with deployment.hooks(), active(plan):
        api = deployment.process()  # connections opened under the hooks
        execution = _Execution(deployment, run, crash_at, deliveries, deployment.container())
        try:
            started = []
            for delivery in range(deliveries):
                plan.arm(execution.target() if delivery == 0 else None)
                try:
                    started.append(start_turn(api, start))
                finally:
                    if delivery == 0:
                        run.invocations.append(len(plan.calls))
            if len(set(map(repr, started))) != 1:
                raise AssertionError(f"a repeated start answered differently: {started}")
        except ProcessDeath:
            # The API function died: no execution was started. The next start of the session
            # past the turn's deadline plus the stale grace takes the session over.
            run.crash = f"invocation 0: {plan.calls[-1] if plan.calls else '?'}"
            plan.arm(None)
            deps = deployment.process()
            deployment.clock.now += deps.limits.wall_clock_seconds + (
                deps.limits.stale_turn_seconds + 1
            )
            run.takeover_op = f"op-next-{uuid.uuid4().hex[:8]}"
            start_turn(
                deps,
                StartTurnInput(
                    session_id=session_id, op_id=run.takeover_op, user_id=USER, text="hello"
                ),
            )
            takeover = TurnRun(session_id, run.takeover_op)
            _drive_execution(
                _Execution(deployment, takeover, None, 1, deployment.container()),
                session_id,
                run.takeover_op,
            )
        else:
            _drive_execution(execution, session_id, run.op_id)
        plan.arm(None)
        deployment.storage(session_id).close()  # the next open retries pending cleanups
    return run


def _drive_execution(execution: _Execution, session_id: str, op_id: str) -> None:
    """The path of `statemachine/turn.asl.json`: Route on the model step's `next`; a Catch on
    ModelStep, RunTools and FinishTurn ends in FailTurn with the caught error."""
    ids: dict[str, Any] = {"session_id": session_id, "op_id": op_id}
    try:
        model = _rounds(execution, ids)
        if model["next"] == "finish":
            execution.task("FinishTurn", ids)
            return
    except TaskFailed as failed:
        caught = failed.caught
    else:
        if model["next"] == "fail":
            execution.task("FailTurnFromModel", {**ids, "error": model.get("error")})
            return
        if model["next"] == "done":
            return  # TurnAlreadyEnded
        caught = {"Error": "UnknownNextAction", "Cause": f"next={model['next']!r}"}
    execution.task("FailTurn", {**ids, "caught": caught})


def _rounds(execution: _Execution, ids: dict[str, Any]) -> dict[str, Any]:
    """ModelStep → RunTools (the Map, one item at a time) → NextRound … until the model step
    routes anywhere else; its last output."""
    round_ = 0
    while True:
        model = execution.task("ModelStep", {**ids, "round": round_})
        if model["next"] == "tools":
            for call_id in model["call_ids"]:
                item = {**ids, "round": model["round"], "call_id": call_id, "approval": "none"}
                execution.task("ToolStep", item)
        elif model["next"] != "model":
            return model
        round_ = model["next_round"]


# -- the matrix -----------------------------------------------------------------------------


@dataclass
class PointResult:
    """One crash point and what the checks found after recovery."""

    point: str
    crash: str | None
    problems: list[str]
    status: str = ""
    """How the crashed turn ended: completed, failed, aborted or never-started."""


def crash_points(deployment: Deployment) -> list[tuple[int, int]]:
    """Every crash point of a clean run: (invocation, call) pairs (local: invocation 0)."""
    if isinstance(deployment, LocalDeployment):
        clean = run_local(deployment, None)
    else:
        clean = run_steps(deployment, None)
    return [(i, k) for i, calls in enumerate(clean.invocations) for k in range(1, calls + 1)]


def crash_matrix(deployment: Deployment, *, every: int = 1) -> list[PointResult]:
    """Run the turn once per crash point (every `every`-th of them) and check each."""
    results = []
    for index, k in crash_points(deployment)[::every]:
        if isinstance(deployment, LocalDeployment):
            run = run_local(deployment, k)
            point = f"call {k}"
        else:
            run = run_steps(deployment, (index, k))
            point = f"invocation {index} call {k}"
        with deployment.storage(run.session_id) as storage:
            record = load_record(storage, run.op_id)
        status = record.status if record is not None else "never-started"
        results.append(PointResult(point, run.crash, check_turn(deployment, run), status))
        if isinstance(deployment, AwsDeployment):
            deployment.forget(run.session_id)
    return results


# -- invariants -----------------------------------------------------------------------------


def check_turn(deployment: Deployment, run: TurnRun) -> list[str]:
    """Every invariant a recovered turn must hold; the violations found (empty = survived)."""
    problems: list[str] = []
    store = deployment.envelopes()
    storage = deployment.storage(run.session_id)
    try:
        envelope = store.get(run.session_id)
        meta = dict(envelope.meta) if envelope is not None else {}
        ops = [run.op_id] + ([run.takeover_op] if run.takeover_op else [])
        for op in ops:
            problems += _check_operation(storage, meta, run.session_id, op)
        problems += _check_transcript(storage, ops)
        if envelope is None:
            problems.append("the envelope is gone")
        elif envelope.working_notes != deployment.plan.notes_written:
            problems.append(
                f"working notes {envelope.working_notes!r} are not the last successful write "
                f"{deployment.plan.notes_written!r}"
            )
        residue = _scope_residue(storage, ops)
        if residue:
            problems.append(f"{residue} frames/checkpoints/memos still readable in op scopes")
        leftovers = deployment.scope_leftovers(run.session_id)
        if leftovers:
            problems.append(f"scope state not deleted: {leftovers[:3]} ({len(leftovers)})")
        problems += _check_sequence(storage, deployment.plan.seqs)
    finally:
        storage.close()
        store.close()
    return problems


def _check_operation(storage: Storage, meta: dict[str, Any], session_id: str, op: str) -> list[str]:
    record = load_record(storage, op)
    state = load_state(storage, op)
    owns = meta.get("turnRunId") == op
    if record is None:
        started = bool(storage.get_entries([f"{op}:user"])) or state is not None
        if started or (owns and meta.get("turnStatus") in ("running", "cancelling")):
            return [
                f"turn {op} is stuck: no terminal record, state={state is not None}, "
                f"envelope={meta.get('turnStatus')!r}"
            ]
        return []  # the crash came before the turn was claimed: it never started
    problems = []
    if record.status not in ENDED:
        problems.append(f"turn {op} ended with unknown status {record.status!r}")
    if state is not None:
        problems.append(f"turn {op} is {record.status} but its operation state remains")
    if owns and meta.get("turnStatus") != record.status:
        problems.append(
            f"envelope says turnStatus={meta.get('turnStatus')!r} but turn {op} is "
            f"{record.status!r}"
        )
    if storage.scan_values(CALL_NS, f"{op}/"):
        problems.append(f"turn {op} ended with call states left")
    return problems


def _check_transcript(storage: Storage, ops: list[str]) -> list[str]:
    problems = []
    messages = branch_messages(storage, load_head(storage))
    try:
        check_transcript(messages)
    except Exception as exc:
        problems.append(f"transcript invalid: {exc}")
    calls: dict[str, int] = {}
    results: dict[str, int] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls[part.id] = calls.get(part.id, 0) + 1
            elif isinstance(part, ToolResultPart):
                results[part.call_id] = results.get(part.call_id, 0) + 1
    for call_id, count in calls.items():
        if count != 1 or results.get(call_id) != 1:
            problems.append(
                f"tool call {call_id}: {count} call(s), {results.get(call_id, 0)} result(s)"
            )
    problems += [f"a result without a call: {c}" for c in results if c not in calls]
    entries = storage.scan_entries()
    users = [e for e in entries if e.data.get("message", {}).get("role") == "user"]
    for op in ops:
        mine = [e for e in users if e.data.get("op") == op]
        if len(mine) > 1:
            problems.append(f"turn {op} has {len(mine)} user entries")
    texts = [(e.data.get("op"), e.data.get("round"), repr(e.data.get("message"))) for e in entries]
    if len(set(texts)) != len(texts):
        problems.append("an entry is duplicated (same op, round and message)")
    return problems


def _scope_residue(storage: Storage, ops: list[str]) -> int:
    left = 0
    for op in ops:
        left += sum(
            len(storage.read_list(frames_address(op, response_id(op, r)))) for r in range(6)
        )
        for namespace in (CHECKPOINT_NS, MEMO_NS):
            left += len(storage.scan_values(namespace, "", op_scope(op)))
    return left


def _check_sequence(storage: Storage, returned: list[int]) -> list[str]:
    """No commit got a sequence another commit got (crashed process and recovery included),
    stored sequences are distinct, and the next commit gets a sequence above all of them."""
    seqs = [e.seq for e in storage.scan_entries()]
    for namespace in (OP_NS, CALL_NS, RESULT_NS, HEAD_NS):
        seqs += [v.seq for v in storage.scan_values(namespace, "")]
    problems = []
    reused = sorted(seq for seq, n in Counter(returned).items() if n > 1)
    if reused:
        problems.append(f"sequences returned by two commits: {reused}")
    entry_seqs = [e.seq for e in storage.scan_entries()]
    if len(set(entry_seqs)) != len(entry_seqs):
        problems.append("two entries share a sequence")
    probe = storage.commit([set_value(value("reliability.probe", "seq"), 1)])
    seen = seqs + returned
    if seen and probe.first_seq <= max(seen):
        problems.append(f"sequence reused: a new commit got {probe.first_seq} ≤ {max(seen)}")
    return problems
