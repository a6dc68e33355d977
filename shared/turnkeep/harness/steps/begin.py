"""How a turn begins (docs/harness.md "Commits per step"): one conditional commit where the
stores share a table, else the claim in steps; the start-rate check and the local turn owner
are the caller's, given as a `StartGate` and the launcher.

The API maps HTTP to `begin_turn` and back; which start mode to use, what a busy session
answers and when the local owner takes over an orphaned turn are decided here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from turnkeep.envelope import (
    Envelope,
    EnvelopeConflictError,
    EnvelopeNotFoundError,
    MetaScalar,
    turn_run_id,
    turn_status,
)
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.envelope_io import attachable
from turnkeep.harness.errors import HarnessError, SessionNotFoundError
from turnkeep.harness.io import StartTurnInput
from turnkeep.harness.steps.start import start_turn, start_turn_attached
from turnkeep.harness.steps.terminal import reconcile_envelope
from turnkeep.storage import Storage
from turnkeep.turn_rules import DELETE_MARKER, is_active

if TYPE_CHECKING:  # local_owner imports the steps package: a runtime import would cycle
    from turnkeep.harness.local_owner import TurnFinding


class SessionBusyError(HarnessError):
    """The session runs a turn (or is being deleted): one turn at a time (the API's 409)."""


@dataclass(frozen=True, slots=True)
class StartSlot:
    """The envelope write that takes one start slot, valid while `expect` holds."""

    patch: dict[str, MetaScalar | None]
    expect: dict[str, list[MetaScalar | None]]


class StartGate(Protocol):
    """The start-rate check of the caller (the API's per-session window, docs/api.md)."""

    def slot(self, meta: Mapping[str, object]) -> StartSlot:
        """The write taking a slot of the window `meta` shows; raises when none is left."""
        ...

    def reserve(self, envelope: Envelope) -> None:
        """Take a slot on its own (compare-and-set, retried); raises when none is left."""
        ...


@runtime_checkable
class TurnOwner(Protocol):
    """A launcher that drives turns in this process and records itself as their owner
    (docs/local.md): told before the claim, asked to take over a turn whose process is gone."""

    def own(self, session_id: str, op_id: str) -> None:
        """Record this process as the owner of `op_id` (before the claim)."""
        ...

    def take_over(self, session_id: str) -> TurnFinding | None:
        """Resume or repair the session's running turn if its process is gone."""
        ...


def begin_turn(
    deps: HarnessDeps,
    storage: Storage,
    inp: StartTurnInput,
    envelope: Envelope,
    *,
    gate: StartGate,
    launcher: object,
) -> None:
    """Claim the session for `inp`, take a start slot and commit the user message.

    `envelope`: as just read. Raises `SessionBusyError` while another turn runs, whatever
    `gate` raises when the rate is spent; `launcher`, when it is a `TurnOwner`, owns the turn.
    """
    owner = launcher if isinstance(launcher, TurnOwner) else None
    busy = is_active(turn_status(envelope.meta))
    if (
        not busy
        and attachable(deps, storage)
        and _begin_in_one_commit(deps, storage, inp, gate, envelope)
    ):
        return
    if busy:
        envelope = _free_or_busy(deps, inp, envelope, owner)
    gate.reserve(envelope)
    if owner is not None:
        # Owner first (docs/local.md): a kill after the claim below must leave an orphan.
        owner.own(inp.session_id, inp.op_id)
    start_turn(deps, inp)


def _begin_in_one_commit(
    deps: HarnessDeps, storage: Storage, inp: StartTurnInput, gate: StartGate, envelope: Envelope
) -> bool:
    """The start as one conditional commit (claim, rate slot, user message); False when the
    envelope changed since it was read (the caller starts in steps, as before)."""
    slot = gate.slot(envelope.meta)
    try:
        start_turn_attached(
            deps,
            storage,
            inp,
            owner_id=inp.user_id,
            envelope_patch=slot.patch,
            envelope_expect=slot.expect,
        )
    except (EnvelopeConflictError, EnvelopeNotFoundError):
        return False
    return True


def _free_or_busy(
    deps: HarnessDeps, inp: StartTurnInput, envelope: Envelope, owner: TurnOwner | None
) -> Envelope:
    """The envelope once the session is free for a turn; `SessionBusyError` while one runs.

    Locally the running turn may have lost its process (a killed `turnkeep chat`): the local
    owner then takes it over (docs/local.md) — it resumes an orphaned turn (still busy, saying
    so) and repairs the envelope of one that had ended (the start goes on).
    """
    session_id = inp.session_id
    running = turn_run_id(envelope.meta)
    what = "is being deleted" if running == DELETE_MARKER else f"runs turn {running!r}"
    if turn_status(envelope.meta) == "awaiting_approval":
        what += " (waiting for an approval: decide it or cancel the turn)"
    if owner is not None and running != DELETE_MARKER:
        finding = owner.take_over(session_id)
        if finding is not None and finding.verdict == "ended":
            fresh = deps.envelopes.get_for_owner(inp.user_id, session_id)
            if fresh is None:
                raise SessionNotFoundError(f"session {session_id!r} does not exist")
            return reconcile_envelope(deps, fresh)
        if finding is not None and finding.verdict == "orphaned":
            what += " (resumed now: the process that drove it is gone)"
    raise SessionBusyError(f"session {session_id!r} {what}; one turn at a time")
