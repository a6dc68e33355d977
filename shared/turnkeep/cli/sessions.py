"""`turnkeep sessions list | show ID | notes ID | delete ID`: the local store's sessions.

Reads the same storage and envelope store as `turnkeep chat` / `serve` (TURNKEEP_STORAGE_URL,
TURNKEEP_ENVELOPE_URL, default `.local/turnkeep.db`). `show` says who drives a running turn
(`turnkeep.harness.local_owner`); `delete` refuses while a live process drives one.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Mapping
from typing import TextIO

from turnkeep.envelope import EnvelopeConflictError, turn_run_id, turn_status
from turnkeep.harness.local_owner import TurnFinding, inspect_turn
from turnkeep.harness.session_removal import remove_session_tree
from turnkeep.runtime.build import Runtime
from turnkeep.storage import open_repository
from turnkeep.turn_rules import DELETE_MARKER, STARTABLE_STATUSES


def _time(epoch_ms: object) -> str:
    if not isinstance(epoch_ms, int) or isinstance(epoch_ms, bool):
        return "-"
    stamp = dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%SZ")


def _session_ids(runtime: Runtime) -> list[str]:
    repository = open_repository(runtime.storage_url)
    try:
        return repository.list_sessions()
    finally:
        repository.close()


def _turn_text(runtime: Runtime, session_id: str, meta: Mapping[str, object]) -> str:
    status = turn_status(meta) or "idle"
    finding = inspect_turn(runtime.deps, session_id)
    if finding is not None and finding.verdict != "ended":
        return f"{status} ({_verdict(finding)})"
    return str(status)


def _verdict(finding: TurnFinding) -> str:
    who = finding.owner.describe() if finding.owner is not None else "no local owner"
    return {
        "orphaned": f"left by {who}, gone: `turnkeep chat --session {finding.session_id}` "
        "then /resume or /cancel",
        "live": f"driven by {who}",
        "unknown": f"{who}",
        "ended": "ended",
    }[finding.verdict]


def list_sessions(runtime: Runtime, out: TextIO, *, children: bool = False) -> int:
    """One line per stored session: id, owner user, title, last update, turn status; a
    sub-agent's child session only with `children` (then with its parent)."""
    ids = _session_ids(runtime)
    if not ids:
        out.write(f"no sessions in {runtime.storage_url}\n")
        return 0
    for session_id in ids:
        envelope = runtime.envelopes.get(session_id)
        if envelope is None:
            out.write(f"{session_id}  (no envelope: stored records only)\n")
            continue
        parent = envelope.parent_session_id
        if parent is not None and not children:
            continue
        title = envelope.meta.get("title") or "-"
        turn = _turn_text(runtime, session_id, envelope.meta)
        below = f"  parent={parent}" if parent is not None else ""
        out.write(
            f"{session_id}  user={envelope.owner_id}  title={title!s}  "
            f"updated={_time(envelope.updated_at)}  turn={turn}{below}\n"
        )
    return 0


def show_session(runtime: Runtime, session_id: str, out: TextIO) -> int:
    """The session's envelope, latest turn and stored counts; 1 if it does not exist."""
    envelope = runtime.envelopes.get(session_id)
    if envelope is None:
        out.write(f"no session {session_id!r} in {runtime.storage_url}\n")
        return 1
    meta = envelope.meta
    storage = runtime.deps.open_storage(session_id)
    try:
        stats = storage.get_stats()
    finally:
        storage.close()
    out.write(f"session  {session_id}\n")
    out.write(f"user     {envelope.owner_id}\n")
    out.write(f"created  {_time(envelope.created_at)}\nupdated  {_time(envelope.updated_at)}\n")
    for key, value in sorted(envelope.host_meta().items()):
        out.write(f"meta     {key} = {value!r}\n")
    out.write(f"turn     {meta.get('turnRunId') or '-'}: {_turn_text(runtime, session_id, meta)}\n")
    if isinstance(meta.get("turnError"), str):
        out.write(f"error    {meta['turnError']}\n")
    out.write(f"stored   {stats.message_count} messages, {stats.usage_rows} model rounds\n")
    notes = envelope.working_notes
    out.write(f"notes    {len(notes.encode()) if notes else 0} bytes (`sessions notes`)\n")
    return 0


def show_notes(runtime: Runtime, session_id: str, out: TextIO) -> int:
    """The working notes; 1 if the session does not exist."""
    envelope = runtime.envelopes.get(session_id)
    if envelope is None:
        out.write(f"no session {session_id!r} in {runtime.storage_url}\n")
        return 1
    out.write((envelope.working_notes or "(no working notes)") + "\n")
    return 0


def delete_session(runtime: Runtime, session_id: str, out: TextIO) -> int:
    """Delete the session like the API's DELETE: claim it, remove its child sessions, its
    storage, then its envelope.

    1 if it does not exist or a turn runs (a turn left by a dead process is ended first by
    `turnkeep chat --session ID` then /cancel: deleting never hides a running turn).
    """
    envelopes = runtime.envelopes
    envelope = envelopes.get(session_id)
    if envelope is None:
        out.write(f"no session {session_id!r} in {runtime.storage_url}\n")
        return 1
    if turn_run_id(envelope.meta) != DELETE_MARKER:
        try:
            envelopes.update_worker_meta(
                session_id,
                {"turnStatus": "running", "turnRunId": DELETE_MARKER},
                expect={"turnStatus": STARTABLE_STATUSES},
            )
        except EnvelopeConflictError:
            turn = _turn_text(runtime, session_id, envelope.meta)
            out.write(f"session {session_id} has a turn {turn}; not deleted\n")
            return 1
    repository = open_repository(runtime.storage_url)
    try:
        children = remove_session_tree(envelopes, repository, envelope.owner_id, session_id)
    finally:
        repository.close()
    also = f" and {len(children)} sub-agent child session(s)" if children else ""
    out.write(f"deleted session {session_id}{also}\n")
    return 0


def run_sessions(args: argparse.Namespace, runtime: Runtime, out: TextIO) -> int:
    """Dispatch `turnkeep sessions <action>`."""
    action = args.action
    if action == "list":
        return list_sessions(runtime, out, children=args.children)
    if action == "show":
        return show_session(runtime, args.session_id, out)
    if action == "notes":
        return show_notes(runtime, args.session_id, out)
    return delete_session(runtime, args.session_id, out)
