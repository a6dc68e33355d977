"""Conformance: scope identity, address isolation and ephemeral values/lists (docs/storage.md)."""

from __future__ import annotations

import pytest

from tests.conformance.backends import BackendHarness
from turnkeep.storage import (
    SESSION_SCOPE,
    InvalidScopeError,
    StorageValidationError,
    append_list,
    delete_list,
    delete_value,
    ephemeral_scope,
    insert_entry,
    retire_scope,
    set_value,
    value,
    value_list,
)


@pytest.mark.parametrize("bad", ["", "\udc80", "a\ud800b", "x" * 181, "/" * 61])
def test_ephemeral_scope_rejects_unusable_ids_with_a_typed_error(bad: str) -> None:
    with pytest.raises(InvalidScopeError):
        ephemeral_scope(bad)


def test_overlong_scope_id_error_names_the_limit_and_the_length() -> None:
    with pytest.raises(InvalidScopeError, match=r"181 characters.*180"):
        ephemeral_scope("y" * 181)


def test_scope_ids_with_separators_and_unicode_hold_their_own_state(
    backend: BackendHarness,
) -> None:
    scope_ids = ["../..", "a/b", "op 1", "é✓", ".", "..", "%2F", "%252F", "é" * 30]
    storage = backend.open()
    for scope_id in scope_ids:
        storage.commit([set_value(value("ns", "k", ephemeral_scope(scope_id)), scope_id)])
    storage.commit([set_value(value("ns", "k"), "session")])
    storage = backend.reopen(storage)
    for scope_id in scope_ids:
        stored = storage.get_value(value("ns", "k", ephemeral_scope(scope_id)))
        assert stored is not None
        assert stored.value == scope_id
    storage.commit([retire_scope(ephemeral_scope("a/b"))])
    storage = backend.reopen(storage)
    assert storage.get_value(value("ns", "k", ephemeral_scope("a/b"))) is None
    assert storage.get_value(value("ns", "k", ephemeral_scope("../.."))) is not None
    session = storage.get_value(value("ns", "k"))
    assert session is not None
    assert session.value == "session"


def test_equal_scope_ids_address_the_same_state(backend: BackendHarness) -> None:
    storage = backend.open()
    storage.commit([set_value(value("ns", "k", ephemeral_scope("op-1")), 1)])
    stored = storage.get_value(value("ns", "k", ephemeral_scope("op-1")))
    assert stored is not None
    assert stored.value == 1


def test_session_and_ephemeral_values_with_equal_namespace_and_key_never_alias(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    session_addr = value("ns", "k")
    scoped_addr = value("ns", "k", ephemeral_scope("op-1"))
    storage.commit([set_value(session_addr, "session")])
    storage.commit([set_value(scoped_addr, "scoped")])
    storage = backend.reopen(storage)
    session_value = storage.get_value(session_addr)
    scoped_value = storage.get_value(scoped_addr)
    assert session_value is not None
    assert scoped_value is not None
    assert (session_value.value, scoped_value.value) == ("session", "scoped")
    storage.commit([delete_value(scoped_addr)])
    assert storage.get_value(session_addr) is not None


def test_session_and_ephemeral_lists_with_equal_namespace_and_key_never_alias(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    session_list = value_list("frames", "r1")
    scoped_list = value_list("frames", "r1", ephemeral_scope("op-1"))
    storage.commit([append_list(session_list, "s")])
    storage.commit([append_list(scoped_list, "e")])
    storage = backend.reopen(storage)
    assert [e.value for e in storage.read_list(session_list)] == ["s"]
    assert [e.value for e in storage.read_list(scoped_list)] == ["e"]


def test_two_ephemeral_ids_with_equal_namespace_and_key_never_alias(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    a = value("ns", "k", ephemeral_scope("A"))
    b = value("ns", "k", ephemeral_scope("B"))
    la = value_list("ns", "k", ephemeral_scope("A"))
    lb = value_list("ns", "k", ephemeral_scope("B"))
    storage.commit([set_value(a, "a"), append_list(la, "a")])
    storage.commit([set_value(b, "b"), append_list(lb, "b")])
    storage = backend.reopen(storage)
    got_a, got_b = storage.get_value(a), storage.get_value(b)
    assert got_a is not None
    assert got_b is not None
    assert (got_a.value, got_b.value) == ("a", "b")
    assert [e.value for e in storage.read_list(la)] == ["a"]
    assert [e.value for e in storage.read_list(lb)] == ["b"]


def test_ephemeral_value_set_get_replace_and_delete(backend: BackendHarness) -> None:
    storage = backend.open()
    addr = value("tool.output", "call-1", ephemeral_scope("op-1"))
    assert storage.get_value(addr) is None
    first = storage.commit([set_value(addr, {"chunk": 1})])
    stored = storage.get_value(addr)
    assert stored is not None
    assert (stored.value, stored.seq, stored.address) == ({"chunk": 1}, first.seqs[0], addr)
    second = storage.commit([set_value(addr, {"chunk": 2})])
    stored = storage.get_value(addr)
    assert stored is not None
    assert (stored.value, stored.seq) == ({"chunk": 2}, second.seqs[0])
    storage.commit([delete_value(addr)])
    assert storage.get_value(addr) is None


def test_ephemeral_value_state_survives_reopen(backend: BackendHarness) -> None:
    storage = backend.open()
    addr = value("tool.output", "call-1", ephemeral_scope("op-1"))
    result = storage.commit([set_value(addr, [1, "two", None, {"x": 3.5}])])
    storage = backend.reopen(storage)
    stored = storage.get_value(addr)
    assert stored is not None
    assert (stored.value, stored.seq) == ([1, "two", None, {"x": 3.5}], result.seqs[0])


def test_deleting_an_absent_ephemeral_value_or_list_is_legal(backend: BackendHarness) -> None:
    storage = backend.open()
    scope = ephemeral_scope("op-1")
    result = storage.commit(
        [delete_value(value("ns", "k", scope)), delete_list(value_list("ns", "k", scope))]
    )
    assert len(result.seqs) == 2


def test_scan_values_returns_only_the_asked_scope_ordered_by_key(backend: BackendHarness) -> None:
    storage = backend.open()
    scope = ephemeral_scope("op-1")
    storage.commit(
        [
            set_value(value("memo", "b", scope), 2),
            set_value(value("memo", "a", scope), 1),
            set_value(value("memo", "ab", scope), 3),
            set_value(value("other", "a", scope), 9),
        ]
    )
    storage.commit([set_value(value("memo", "a"), "session")])
    storage.commit([set_value(value("memo", "a", ephemeral_scope("op-2")), "op-2")])
    scanned = storage.scan_values("memo", scope=scope)
    assert [(v.address.key, v.value) for v in scanned] == [("a", 1), ("ab", 3), ("b", 2)]
    assert all(v.address.scope == scope for v in scanned)
    prefixed = storage.scan_values("memo", "a", scope)
    assert [v.address.key for v in prefixed] == ["a", "ab"]
    session = storage.scan_values("memo")
    assert [(v.address.key, v.value, v.address.scope) for v in session] == [
        ("a", "session", SESSION_SCOPE)
    ]


def test_ephemeral_list_append_page_and_whole_list_delete(backend: BackendHarness) -> None:
    storage = backend.open()
    frames = value_list("frames", "resp-1", ephemeral_scope("op-1"))
    seqs = [storage.commit([append_list(frames, {"i": i})]).seqs[0] for i in range(5)]
    page = storage.read_list(frames, limit=2)
    assert [(e.seq, e.value) for e in page] == [(seqs[0], {"i": 0}), (seqs[1], {"i": 1})]
    rest = storage.read_list(frames, cursor=page[-1].seq)
    assert [e.value for e in rest] == [{"i": 2}, {"i": 3}, {"i": 4}]
    storage.commit([delete_list(frames)])
    assert storage.read_list(frames) == []
    storage = backend.reopen(storage)
    assert storage.read_list(frames) == []


def test_list_recreated_after_whole_list_delete_holds_only_new_elements(
    backend: BackendHarness,
) -> None:
    storage = backend.open()
    frames = value_list("frames", "resp-1", ephemeral_scope("op-1"))
    storage.commit([append_list(frames, "old")])
    storage.commit([delete_list(frames)])
    storage.commit([append_list(frames, "new")])
    storage = backend.reopen(storage)
    assert [e.value for e in storage.read_list(frames)] == ["new"]


def test_address_constructors_reject_bad_parts_naming_them() -> None:
    with pytest.raises(StorageValidationError, match="namespace"):
        value("")
    with pytest.raises(StorageValidationError, match="key"):
        value_list("ns", "a\x00b")
    with pytest.raises(StorageValidationError, match="scope"):
        value("ns", "k", "op-1")  # type: ignore[arg-type]


ROUND_TRIP_VALUES: list[object] = [
    None,
    True,
    0,
    -(2**53),
    2**63 + 1,
    1.5,
    1e-300,
    "",
    'é ✓ 😀 \n\t"quoted" \\ \u2028',
    [],
    {},
    {"nested": [1, {"deep": [None, False, 2.25]}], "": "empty key"},
]


def test_json_values_round_trip_exactly_after_reopen(backend: BackendHarness) -> None:
    storage = backend.open()
    scope = ephemeral_scope("op-1")
    storage.commit([set_value(value("v", str(i)), v) for i, v in enumerate(ROUND_TRIP_VALUES)])
    storage.commit(
        [
            append_list(value_list("l", "", scope), v, tag=f"t{i}")
            for i, v in enumerate(ROUND_TRIP_VALUES)
        ]
    )
    storage.commit([insert_entry("e", None, "message", ROUND_TRIP_VALUES)])
    storage = backend.reopen(storage)
    for i, expected in enumerate(ROUND_TRIP_VALUES):
        stored = storage.get_value(value("v", str(i)))
        assert stored is not None
        assert stored.value == expected
        assert type(stored.value) is type(expected)
    elements = storage.read_list(value_list("l", "", scope))
    assert [e.value for e in elements] == ROUND_TRIP_VALUES
    assert [type(e.value) for e in elements] == [type(v) for v in ROUND_TRIP_VALUES]
    assert [e.data for e in storage.get_entries(["e"])] == [ROUND_TRIP_VALUES]


def test_keys_are_exact_strings_not_prefixes_or_case_folded(backend: BackendHarness) -> None:
    storage = backend.open()
    keys = ["k", "K", "k ", "k/", "k/x", "", "é", "e\u0301"]
    storage.commit([set_value(value("ns", k), k) for k in keys])
    storage = backend.reopen(storage)
    for k in keys:
        stored = storage.get_value(value("ns", k))
        assert stored is not None
        assert stored.value == k
    assert [v.address.key for v in storage.scan_values("ns", "k")] == ["k", "k ", "k/", "k/x"]


def test_write_errors_name_the_scoped_address() -> None:
    with pytest.raises(StorageValidationError, match=r"'cfg'.*'op-1'"):
        set_value(value("cfg", "k", ephemeral_scope("op-1")), {1, 2})
