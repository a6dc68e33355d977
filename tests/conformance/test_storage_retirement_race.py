"""Conformance: retirement cleanup racing later lifetimes of the same scope id (docs/storage.md).

A retirement's physical cleanup (JSONL unlink, S3 delete) must be serialized against later
writes of the reused id, so it can never remove a write of a newer lifetime.
"""

from __future__ import annotations

import threading

from tests.conformance.backends import BackendHarness
from turnkeep.storage import append_list, ephemeral_scope, retire_scope, value_list

SCOPE = ephemeral_scope("op-reused")
FRAMES = value_list("frames", "r", SCOPE)
ROUNDS = 40


def test_retirements_racing_writes_of_the_reused_scope_never_lose_a_later_lifetime_write(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    errors: list[BaseException] = []
    written: list[tuple[int, str]] = []
    retirements: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(2)

    def retirer() -> None:
        start.wait()
        try:
            for _ in range(ROUNDS):
                seq = storage.commit([retire_scope(SCOPE)]).seqs[0]
                with lock:
                    retirements.append(seq)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def writer() -> None:
        start.wait()
        try:
            for i in range(ROUNDS):
                seq = storage.commit([append_list(FRAMES, f"w{i}")]).seqs[0]
                with lock:
                    written.append((seq, f"w{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=retirer), threading.Thread(target=writer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    last_retirement = max(retirements)
    live = sorted(w for w in written if w[0] > last_retirement)
    assert [(e.seq, e.value) for e in storage.read_list(FRAMES)] == live
    storage = backend.reopen(storage)
    assert [(e.seq, e.value) for e in storage.read_list(FRAMES)] == live
    storage.commit([append_list(FRAMES, "after reopen")])
    storage = backend.reopen(storage)
    assert [e.value for e in storage.read_list(FRAMES)] == [v for _, v in live] + ["after reopen"]
