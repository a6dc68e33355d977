"""Deleting a session with its child sessions (docs/api.md `DELETE /sessions/{id}`,
docs/agent.md "Sub-agents").

A sub-agent call's child session belongs to its parent: its envelope carries the parent's id
(`parentSessionId`, written with the envelope), so one listing of the owner's envelopes finds
every descendant. The caller claims the parent first (no turn can start there); a child turn
runs only inside a parent turn, so the claim holds the children still too.
"""

from __future__ import annotations

from collections.abc import Iterable

from turnkeep.envelope import Envelope, EnvelopeStore
from turnkeep.storage import Repository


def descendant_ids(envelopes: Iterable[Envelope], session_id: str) -> list[str]:
    """The ids of `session_id`'s child sessions and theirs, deepest first (so a delete that
    stops half way leaves every remaining child reachable from a parent still listed)."""
    children: dict[str, list[str]] = {}
    for envelope in envelopes:
        parent = envelope.parent_session_id
        if parent is not None:
            children.setdefault(parent, []).append(envelope.session_id)
    found: list[str] = []
    frontier, seen = [session_id], {session_id}
    while frontier:
        level = [c for p in frontier for c in sorted(children.get(p, [])) if c not in seen]
        seen.update(level)
        found = level + found
        frontier = level
    return found


def remove_session_tree(
    envelopes: EnvelopeStore, repository: Repository, owner_id: str, session_id: str
) -> list[str]:
    """Delete every record and the envelope of `session_id`'s descendants, then of the
    session itself (one owner listing, then per session its storage and its envelope);
    returns the child session ids removed."""
    children = descendant_ids(envelopes.list_for_owner(owner_id), session_id)
    for child in children:
        repository.delete_session(child)
        envelopes.delete(child)
    repository.delete_session(session_id)
    envelopes.delete(session_id)
    return children


def is_child_session(envelope: Envelope) -> bool:
    """Whether `envelope` is a sub-agent call's child session (listings leave it out)."""
    return envelope.parent_session_id is not None
