"""Who drives a local turn, and what to do with a turn whose driver is gone (docs/local.md).

A local driver (`turnkeep chat`/`demo`, the `turnkeep serve` orchestrator) records itself as the
turn's owner — process id, host, the process's start time — in the session's storage *before*
`start_turn` claims the session, and removes the record when the turn has ended. Whoever opens
the session next classifies the envelope's running turn with `inspect_turn`:

- `ended`: storage holds the turn's record; only the envelope lags → `settle` repairs it;
- `orphaned`: the owner process is gone (or its pid now belongs to another process) →
  resume it (the new driver records itself first) or end it honestly;
- `live`: a running process on this host owns it → leave it alone;
- `unknown`: no owner recorded (a turn driven elsewhere, e.g. by Step Functions) or one on
  another host → leave it alone; the harness ends it once it is stale (`stale_turn_seconds`).
"""

from __future__ import annotations

import os
import socket
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from turnkeep.envelope import turn_run_id, turn_status
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.errors import OperationNotFoundError
from turnkeep.harness.io import FailTurnInput, TurnResult
from turnkeep.harness.orchestrator import ToolListener, resume_turn, run_turn
from turnkeep.harness.state import load_record, load_state, validate_op_id
from turnkeep.harness.steps import EventListener, abort_turn, fail_turn, new_op_id
from turnkeep.harness.steps.common import settle_envelope
from turnkeep.storage import Storage, delete_value, set_value, value
from turnkeep.turn_rules import DELETE_MARKER

OWNER_NS = "local.owner"
"""Session-scoped value `value(OWNER_NS, op_id)`: the local process driving that turn."""

Verdict = Literal["ended", "orphaned", "live", "unknown"]


class Owner(BaseModel):
    """A local process driving a turn."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)  # local mode only

    pid: int
    host: str
    process_start: str | None = None
    """The kernel's start time of `pid` (Linux `/proc/<pid>/stat` field 22), to tell pid reuse."""
    since: float = 0.0
    """When it took the turn (epoch seconds)."""

    def describe(self) -> str:
        """`pid 123 on host`."""
        return f"pid {self.pid} on {self.host}"


def _process_start(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def current_owner() -> Owner:
    """This process as a turn owner."""
    pid = os.getpid()
    return Owner(
        pid=pid, host=socket.gethostname(), process_start=_process_start(pid), since=time.time()
    )


def owner_alive(owner: Owner) -> bool | None:
    """True if the owner process runs, False if it is gone, None if it cannot be told here."""
    if owner.host != socket.gethostname():
        return None
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    if owner.process_start is not None:
        now = _process_start(owner.pid)
        if now is not None and now != owner.process_start:
            return False  # the pid was reused by another process
    return True


def record_owner(storage: Storage, op_id: str, owner: Owner | None = None) -> None:
    """Record `owner` (default: this process) as the driver of `op_id`."""
    who = owner or current_owner()
    storage.commit([set_value(value(OWNER_NS, op_id), who.model_dump(mode="json"))])


def load_owner(storage: Storage, op_id: str) -> Owner | None:
    """The recorded driver of `op_id`, if any."""
    stored = storage.get_value(value(OWNER_NS, op_id))
    if stored is None or not isinstance(stored.value, dict):
        return None
    return Owner.model_validate(stored.value)


def clear_owner(storage: Storage, op_id: str) -> None:
    """Forget the driver of `op_id` (its turn ended)."""
    storage.commit([delete_value(value(OWNER_NS, op_id))])


@dataclass(frozen=True)
class TurnFinding:
    """The envelope's running turn of a session and what its owner record says about it."""

    session_id: str
    op_id: str
    verdict: Verdict
    cancelling: bool
    owner: Owner | None

    def describe(self) -> str:
        """One line for a person."""
        who = self.owner.describe() if self.owner is not None else "no local owner recorded"
        return {
            "ended": f"turn {self.op_id} has ended; the session record was behind",
            "orphaned": f"turn {self.op_id} was left running by {who}, which is gone",
            "live": f"turn {self.op_id} is running, driven by {who}",
            "unknown": f"turn {self.op_id} is running ({who}); it cannot be checked from here",
        }[self.verdict]


def inspect_turn(deps: HarnessDeps, session_id: str) -> TurnFinding | None:
    """The session's running turn and its verdict; None when no turn is running."""
    envelope = deps.envelopes.get(session_id)
    meta = envelope.meta if envelope is not None else {}
    status = turn_status(meta)
    op_id = turn_run_id(meta)
    if status not in ("running", "cancelling") or not isinstance(op_id, str):
        return None
    if op_id == DELETE_MARKER:
        return None
    try:
        validate_op_id(op_id)
    except ValueError:
        return None
    storage = deps.open_storage(session_id)
    try:
        owner = load_owner(storage, op_id)
        if load_state(storage, op_id) is None and load_record(storage, op_id) is not None:
            verdict: Verdict = "ended"
        elif owner is None:
            verdict = "unknown"
        else:
            alive = owner_alive(owner)
            verdict = "unknown" if alive is None else ("live" if alive else "orphaned")
    finally:
        storage.close()
    return TurnFinding(session_id, op_id, verdict, status == "cancelling", owner)


def settle_ended(deps: HarnessDeps, finding: TurnFinding) -> None:
    """Bring the envelope in line with the ended turn's record (the harness's repair)."""
    storage = deps.open_storage(finding.session_id)
    try:
        settle_envelope(deps, storage, finding.session_id, finding.op_id)
        clear_owner(storage, finding.op_id)
    finally:
        storage.close()


def end_orphan(deps: HarnessDeps, finding: TurnFinding, why: str) -> TurnResult:
    """End an orphaned turn honestly: aborted if a cancel was asked, else failed with `why`."""
    if finding.cancelling:
        result = abort_turn(deps, finding.session_id, finding.op_id)
    else:
        result = fail_turn(
            deps, FailTurnInput(session_id=finding.session_id, op_id=finding.op_id, error=why)
        )
    forget_owner(deps, finding.session_id, finding.op_id)
    return result


def drive(
    deps: HarnessDeps,
    session_id: str,
    op_id: str,
    *,
    on_event: EventListener | None = None,
    on_tool: ToolListener | None = None,
) -> TurnResult:
    """`resume_turn` as this process's turn: record the owner first, forget it at the end."""
    _record(deps, session_id, op_id)
    try:
        return resume_turn(deps, session_id, op_id, on_event=on_event, on_tool=on_tool)
    finally:
        forget_owner(deps, session_id, op_id)


def run_owned_turn(
    deps: HarnessDeps,
    session_id: str,
    user_id: str,
    text: str,
    *,
    model: str,
    on_event: EventListener | None = None,
    on_tool: ToolListener | None = None,
) -> TurnResult:
    """`run_turn` owned by this process, with `model` recorded with the turn.

    Interrupted (Ctrl-C, or SIGTERM turned into KeyboardInterrupt), the turn is ended as
    aborted before the interrupt goes on, so the session is not left running.
    """
    op_id = new_op_id()
    _record(deps, session_id, op_id)
    try:
        return run_turn(
            deps,
            session_id,
            user_id,
            text,
            op_id=op_id,
            model=model,
            on_event=on_event,
            on_tool=on_tool,
        )
    except KeyboardInterrupt:
        end_interrupted(deps, session_id, op_id)
        raise
    finally:
        forget_owner(deps, session_id, op_id)


def end_interrupted(deps: HarnessDeps, session_id: str, op_id: str) -> None:
    """End `op_id` as aborted after its driver was interrupted (also before its first commit)."""
    try:
        abort_turn(deps, session_id, op_id)
    except OperationNotFoundError:
        # Interrupted inside start_turn: claimed (or not even that); fail_turn ends a claim.
        with suppress(OperationNotFoundError):
            fail_turn(
                deps,
                FailTurnInput(session_id=session_id, op_id=op_id, error="cancelled by request"),
            )


def _record(deps: HarnessDeps, session_id: str, op_id: str) -> None:
    storage = deps.open_storage(session_id)
    try:
        record_owner(storage, op_id)
    finally:
        storage.close()


def forget_owner(deps: HarnessDeps, session_id: str, op_id: str) -> None:
    """Remove the owner record of `op_id` (its turn ended)."""
    storage = deps.open_storage(session_id)
    try:
        clear_owner(storage, op_id)
    finally:
        storage.close()
