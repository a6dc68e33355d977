"""Entry checks of the resident backends cost O(entries of the transaction), not O(session);
entry reads decode every payload afresh, in sequence order."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from turnkeep.storage import insert_entry
from turnkeep.storage.errors import EntryConflictError
from turnkeep.storage.jsonvalue import load_json, load_json_many
from turnkeep.storage.memory_state import MemoryState
from turnkeep.storage.writes import build_transaction, missing_parents


class ProbeOnlyIds(dict[str, object]):
    """An id index that may be probed (`in`) but not iterated or sized: copying it, as a
    per-commit `set(...)` of every entry id did, fails loudly."""

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the entry index was iterated (copied) by a check")

    def __len__(self) -> int:
        raise AssertionError("the entry index was sized (copied) by a check")


def test_a_parent_check_probes_the_existing_ids_without_copying_them() -> None:
    existing = ProbeOnlyIds(a=1)
    txn = build_transaction(
        [
            insert_entry("b", "a", "message", {}),
            insert_entry("c", "b", "message", {}),
            insert_entry("d", "zz", "message", {}),
        ]
    )
    assert missing_parents(txn, existing) == [("d", "zz")]


def test_a_commit_check_of_a_large_session_does_not_copy_its_entry_index() -> None:
    state = MemoryState()
    for i, entry_id in enumerate(["m0", "m1", "m2"]):
        parent = None if i == 0 else f"m{i - 1}"
        txn = build_transaction([insert_entry(entry_id, parent, "message", {"i": i})])
        state.check(txn)
        state.apply(txn, state.next_seq)
    probe = ProbeOnlyIds(state.entries.index)
    state.entries.index = probe  # type: ignore[assignment]

    state.check(build_transaction([insert_entry("m3", "m2", "message", {})]))
    with pytest.raises(EntryConflictError, match="'nope'"):
        state.check(build_transaction([insert_entry("m4", "nope", "message", {})]))
    with pytest.raises(EntryConflictError, match="'m1' already exists"):
        state.check(build_transaction([insert_entry("m1", "m0", "message", {})]))


def test_entry_counts_in_the_stats_follow_every_applied_entry() -> None:
    state = MemoryState()
    txn = build_transaction(
        [insert_entry("m0", None, "message", {}), insert_entry("n0", "m0", "note", {})]
    )
    state.apply(txn, 1)
    assert (state.stats.entry_count, state.stats.message_count) == (2, 1)
    state.apply(build_transaction([insert_entry("m1", "n0", "message", {})]), 3)
    assert (state.stats.entry_count, state.stats.message_count) == (3, 2)


@pytest.mark.parametrize(
    "texts",
    [
        [],
        ['{"a":1}'],
        ["1", "-2.5e-07", "null", "true", '"é ☃ \\u0000"', "[]", "{}", '[1,{"b":[null]}]'],
        ['{"x":12345678901234567890123}', "1.0", "0", '{"k":"v"}', '{"k":"v"}'],
    ],
)
def test_decoding_many_payloads_at_once_equals_decoding_each(texts: list[str]) -> None:
    decoded = load_json_many(texts)

    assert decoded == [load_json(text) for text in texts]
    assert [type(v) for v in decoded] == [type(load_json(text)) for text in texts]
    if len(decoded) == 5:
        assert decoded[3] is not decoded[4], "every payload is a fresh object"


def test_entry_scans_and_lookups_return_fresh_payloads_in_sequence_order() -> None:
    state = MemoryState()
    for i in range(5):
        txn = build_transaction([insert_entry(f"m{i}", None, "message", {"i": i})])
        state.apply(txn, 10 + 2 * i)

    assert [e.seq for e in state.scan_entries(13, 2)] == [14, 16]
    assert [e.id for e in state.scan_entries(None, None)] == ["m0", "m1", "m2", "m3", "m4"]
    assert state.scan_entries(18, None) == []
    looked_up = state.get_entries(["m3", "nope", "m3"])
    assert [e.id for e in looked_up] == ["m3", "m3"]
    assert looked_up[0].data is not looked_up[1].data
    looked_up[0].data["i"] = 99  # type: ignore[index]
    assert state.get_entries(["m3"])[0].data == {"i": 3}
