"""A step's envelope reads and writes, riding on its storage requests where the envelope store
and the session storage share a table (one request instead of two: docs/aws-storage.md,
"Requests per turn"); elsewhere they are separate calls with the same outcome."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import suppress
from typing import Final

from turnkeep.envelope import (
    Envelope,
    EnvelopeConflictError,
    EnvelopeNotFoundError,
    MetaScalar,
)
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.live import guard_attached, seen_envelope, watched_since
from turnkeep.storage import CommitResult, Storage, Value, Write
from turnkeep.storage.errors import AttachedConditionError
from turnkeep.storage.scopes import EphemeralScope

MAX_TRIES: Final = 5
"""Commit attempts at most: 2 lost envelope races, the others to watchers' subscribes."""

PatchFor = Callable[[tuple[int, ...]], Mapping[str, MetaScalar | None]]
Expect = Mapping[str, Collection[MetaScalar | None]]


def attachable(deps: HarnessDeps, storage: Storage) -> bool:
    """Whether envelope writes can ride in `storage`'s session commits."""
    key = deps.envelopes.attached_key(storage.session_id)
    return key is not None and storage.attached_table() == key.table


def read_ahead(
    deps: HarnessDeps,
    storage: Storage,
    *,
    values: Sequence[Value] = (),
    scopes: Sequence[EphemeralScope] = (),
    entries: Sequence[str] = (),
    head: bool = False,
) -> Envelope | None:
    """The session's envelope, with `values`, `scopes`, `entries` (their sequences) and (with
    `head`) the sequence head read ahead in the same request where the backends allow
    (`Storage.prefetch`)."""
    key = deps.envelopes.attached_key(storage.session_id)
    if key is not None and storage.attached_table() == key.table:
        found = storage.prefetch(values, scopes=scopes, attached=[key], head=head, entries=entries)
        if found is not None:
            seen_envelope(deps.live, storage.session_id, found.get(key))
            return deps.envelopes.decode_attached(found.get(key))
    else:
        storage.prefetch(values, scopes=scopes, head=head, entries=entries)
    return deps.envelopes.get(storage.session_id)


def commit_with_envelope(
    deps: HarnessDeps,
    storage: Storage,
    writes: Sequence[Write],
    *,
    guard: Value | None,
    patch_for: PatchFor,
    expect: Expect,
    owner_id: str | None = None,
) -> CommitResult:
    """Commit `writes` and the envelope patch as one atomic request (needs `attachable`).

    Raises `EnvelopeConflictError` / `EnvelopeNotFoundError` as `update_worker_meta` would,
    with nothing written; storage errors (a failed guard first) as `Storage.commit`.
    """
    session_id = storage.session_id
    stamp: int | None = None
    attempts = tries = 0
    while attempts < 2 and tries < MAX_TRIES:
        tries += 1
        attach = deps.envelopes.attached_update(
            session_id, patch_for, expect=expect, owner_id=owner_id, stamp=stamp
        )
        try:
            return storage.commit(
                writes, guard=guard, attach=guard_attached(deps.live, session_id, attach)
            )
        except AttachedConditionError as exc:
            item = _item(exc.item)
            # A watcher subscribed since the step's read (its sink's condition): once more,
            # without counting it as a lost race (it happens once per subscribe).
            if not watched_since(deps.live, session_id, item):
                attempts += 1
            # Raises when the condition really failed; else a lost updatedAt race: once more.
            stamp = deps.envelopes.attached_failure(
                session_id, item, expect=expect, owner_id=owner_id
            )
    raise EnvelopeConflictError(
        f"session {session_id!r}: a concurrent envelope write won twice; not applied"
    )


def commit_mirrored(
    deps: HarnessDeps,
    storage: Storage,
    writes: Sequence[Write],
    *,
    guard: Value | None,
    patch_for: PatchFor,
    expect: Expect,
) -> CommitResult:
    """Commit `writes`, then mirror `patch_for(seqs)` into the envelope while `expect` holds.

    The commit lands either way (storage is the truth; a later turn may own the envelope):
    one request where the stores share a table, a commit plus an update elsewhere.
    """
    if attachable(deps, storage):
        try:
            return commit_with_envelope(
                deps, storage, writes, guard=guard, patch_for=patch_for, expect=expect
            )
        except EnvelopeConflictError:
            return storage.commit(writes, guard=guard)
        except EnvelopeNotFoundError:
            storage.commit(writes, guard=guard)
            raise
    result = storage.commit(writes, guard=guard)
    with suppress(EnvelopeConflictError):
        deps.envelopes.update_worker_meta(storage.session_id, patch_for(result.seqs), expect=expect)
    return result


def _item(raw: object) -> Mapping[str, object] | None:
    return raw if isinstance(raw, Mapping) else None
