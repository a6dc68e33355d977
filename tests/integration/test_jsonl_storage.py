"""JSONL backend: sidecars, retirement boundaries, crash repair, file layout (docs/jsonl-format.md).

There is no migration from older formats: turnkeep never wrote a version before the current one.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turnkeep.storage import (
    SESSION_SCOPE,
    Storage,
    StorageClosedError,
    StorageCorruptionError,
    StorageUnavailableError,
    StorageValidationError,
    Value,
    append_list,
    delete_value,
    ephemeral_scope,
    insert_entry,
    open_repository,
    open_storage,
    retire_scope,
    set_value,
    value,
    value_list,
)
from turnkeep.storage import jsonl as jsonl_module
from turnkeep.storage import jsonl_sidecars as sidecar_files
from turnkeep.storage.jsonl import JsonlStorage, live_session_count

OP = ephemeral_scope("op-1")
FRAMES = value_list("frames", "r1", OP)
MEMO = value("memo", "tool-1", OP)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def url(store: Path) -> str:
    return f"jsonl://{store}"


@pytest.fixture(autouse=True)
def _no_leaked_sessions() -> Iterator[None]:
    before = live_session_count()
    yield
    assert live_session_count() == before, "a test left a JSONL session open"


def _open(url: str, session_id: str = "s1") -> JsonlStorage:
    storage = open_storage(url, session_id)
    assert isinstance(storage, JsonlStorage)
    return storage


def _main(store: Path, session_id: str = "s1") -> Path:
    return store / f"{session_id}.jsonl"


def _scopes(store: Path, session_id: str = "s1") -> Path:
    return store / f"{session_id}.jsonl.scopes"


def _sidecar(store: Path, scope_id: str = "op-1", session_id: str = "s1") -> Path:
    return _scopes(store, session_id) / f"scope-{scope_id}.scope"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _write_lines(path: Path, objects: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")


def _main_header(session_id: str = "s1", next_seq: int = 1) -> dict[str, Any]:
    return {
        "v": 5,
        "kind": "session_header",
        "sessionId": session_id,
        "storageVersion": 1,
        "nextSeq": next_seq,
    }


def _scope_header(scope_id: str = "op-1", session_id: str = "s1") -> dict[str, Any]:
    return {
        "v": 5,
        "kind": "scope_header",
        "sessionId": session_id,
        "scopeId": scope_id,
        "storageVersion": 1,
    }


def _append_record(seq: int, element: object, scope_id: str = "op-1") -> dict[str, Any]:
    return {
        "kind": "txn",
        "scopeId": scope_id,
        "seqs": [seq],
        "ts": 1,
        "writes": [{"kind": "append", "ns": "frames", "key": "r1", "value": element}],
    }


def _retire_record(seq: int, scope_id: str = "op-1") -> dict[str, Any]:
    return {
        "kind": "txn",
        "seqs": [seq],
        "ts": 1,
        "writes": [{"kind": "scope", "op": "retire", "scopeId": scope_id}],
    }


def _read(storage: Storage, address: Value) -> object:
    found = storage.get_value(address)
    assert found is not None, f"{address} is absent"
    return found.value


def _elements(storage: Storage) -> list[tuple[int, object]]:
    return [(e.seq, e.value) for e in storage.read_list(FRAMES)]


@pytest.fixture
def unlink_fails(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every unlink of the backend fail (as if the process died before it)."""
    attempts: list[str] = []

    def refuse(path: str) -> None:
        attempts.append(path)
        raise PermissionError(f"injected: cannot unlink {path}")

    monkeypatch.setattr(sidecar_files, "remove_file", refuse)
    return attempts


# -- sidecar creation and routing -------------------------------------------------------------


def test_first_scoped_write_creates_exactly_one_valid_sidecar_and_no_main_record(
    url: str, store: Path
) -> None:
    with _open(url) as storage:
        result = storage.commit([append_list(FRAMES, "f1")])

    assert [p.name for p in _scopes(store).iterdir()] == ["scope-op-1.scope"]
    header, *records = _lines(_sidecar(store))
    assert header == _scope_header()
    assert len(records) == 1
    assert records[0]["scopeId"] == "op-1"
    assert records[0]["seqs"] == list(result.seqs)
    assert _lines(_main(store)) == [_main_header()]


def test_several_writes_in_one_scoped_transaction_are_one_sidecar_line(
    url: str, store: Path
) -> None:
    with _open(url) as storage:
        result = storage.commit(
            [append_list(FRAMES, "f1"), append_list(FRAMES, "f2", tag="end"), set_value(MEMO, 7)]
        )

    _, *records = _lines(_sidecar(store))
    assert len(records) == 1
    assert records[0]["seqs"] == list(result.seqs) == [1, 2, 3]
    assert [w["kind"] for w in records[0]["writes"]] == ["append", "append", "set"]


def test_retirement_records_go_to_the_main_log_only(url: str, store: Path) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
        storage.commit([set_value(value("op.state", "op-1"), "done"), retire_scope(OP)])

    records = _lines(_main(store))[1:]
    assert records[0]["writes"][1] == {"kind": "scope", "op": "retire", "scopeId": "op-1"}
    assert not _sidecar(store).exists()


def test_scope_ids_are_encoded_into_a_fixed_prefix_file_name_without_path_escape(
    url: str, store: Path
) -> None:
    scope = ephemeral_scope("../x y/é")
    with _open(url) as storage:
        storage.commit([set_value(value("memo", "k", scope), 1)])
    with _open(url) as storage:
        assert storage.get_value(value("memo", "k", scope)) is not None

    assert [p.name for p in _scopes(store).iterdir()] == ["scope-..%2Fx%20y%2F%C3%A9.scope"]


def test_main_and_several_sidecars_replay_in_global_sequence_order(url: str) -> None:
    scope_b = ephemeral_scope("op-2")
    frames_b = value_list("frames", "r1", scope_b)
    with _open(url) as storage:
        seqs = [
            storage.commit([append_list(FRAMES, "a1")]).seqs,
            storage.commit([insert_entry("e1", None, "message", "hi")]).seqs,
            storage.commit([append_list(frames_b, "b1")]).seqs,
            storage.commit([append_list(FRAMES, "a2")]).seqs,
            storage.commit([retire_scope(scope_b)]).seqs,
            storage.commit([append_list(frames_b, "b2")]).seqs,
            storage.commit([insert_entry("e2", "e1", "message", "ho")]).seqs,
        ]
    assert [s[0] for s in seqs] == [1, 2, 3, 4, 5, 6, 7]

    with _open(url) as storage:
        assert _elements(storage) == [(1, "a1"), (4, "a2")]
        assert [(e.seq, e.value) for e in storage.read_list(frames_b)] == [(6, "b2")]
        assert [(e.id, e.seq) for e in storage.scan_entries()] == [("e1", 2), ("e2", 7)]
        assert storage.commit([append_list(FRAMES, "a3")]).seqs == (8,)


def test_a_sequence_held_by_two_files_fails_open(url: str, store: Path) -> None:
    _write_lines(
        _main(store),
        [
            _main_header(),
            {
                "kind": "txn",
                "seqs": [1],
                "ts": 1,
                "writes": [{"kind": "delete", "ns": "a", "key": ""}],
            },
        ],
    )
    _write_lines(_sidecar(store), [_scope_header(), _append_record(1, "dup")])

    with pytest.raises(StorageCorruptionError, match="seq 1"):
        _open(url)


def test_non_increasing_sequences_inside_one_file_fail_open(url: str, store: Path) -> None:
    _write_lines(_main(store), [_main_header()])
    _write_lines(_sidecar(store), [_scope_header(), _append_record(5, "x"), _append_record(4, "y")])

    with pytest.raises(StorageCorruptionError, match="line 3"):
        _open(url)


# -- high-water -------------------------------------------------------------------------------


def test_header_next_seq_raises_the_reopen_high_water(url: str, store: Path) -> None:
    _write_lines(_main(store), [_main_header(next_seq=50)])

    with _open(url) as storage:
        assert storage.commit([set_value(value("a"), 1)]).seqs == (50,)


def test_sidecar_records_raise_the_reopen_high_water(url: str) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
        last = storage.commit([append_list(FRAMES, "f"), append_list(FRAMES, "g")]).seqs[-1]

    with _open(url) as storage:
        assert storage.commit([set_value(value("a"), 2)]).seqs == (last + 1,)


def test_ignored_pre_boundary_records_still_prevent_sequence_reuse(
    url: str, store: Path, unlink_fails: list[str]
) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
        storage.commit([append_list(FRAMES, "f1")])
        storage.commit([append_list(FRAMES, "f2"), append_list(FRAMES, "f3")])
        storage.commit([retire_scope(OP)])
    sidecar_seqs = [s for record in _lines(_sidecar(store))[1:] for s in record["seqs"]]
    assert sidecar_seqs == [2, 3, 4]

    with _open(url) as storage:
        assert storage.read_list(FRAMES) == []
        assert storage.commit([append_list(FRAMES, "new")]).seqs == (6,)


# -- torn tails and corruption -----------------------------------------------------------------


def test_torn_sidecar_final_transaction_is_discarded_and_the_file_repaired(
    url: str, store: Path
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
        storage.commit([append_list(FRAMES, "f2"), append_list(FRAMES, "f3")])
    path = _sidecar(store)
    data = path.read_bytes()
    complete = data[: data.rstrip(b"\n").rfind(b"\n") + 1]
    path.write_bytes(data[:-1])  # the last transaction lost only its newline

    with _open(url) as storage:
        assert _elements(storage) == [(1, "f1")]
        assert path.read_bytes() == complete
        assert storage.commit([append_list(FRAMES, "f4")]).seqs == (2,)
    with _open(url) as storage:
        assert _elements(storage) == [(1, "f1"), (2, "f4")]


def test_torn_main_final_line_is_discarded_and_the_file_repaired(url: str, store: Path) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
    with _main(store).open("ab") as handle:
        handle.write(b'{"kind":"txn","seqs":[2],"ts":1,"writes":[{"kind":"set","ns":"a"')
    size_before_tear = len(
        b"".join(line + b"\n" for line in _main(store).read_bytes().split(b"\n")[:2])
    )

    with _open(url) as storage:
        assert _read(storage, value("a")) == 1
        assert _main(store).stat().st_size == size_before_tear
        storage.commit([set_value(value("a"), 2)])
    with _open(url) as storage:
        assert _read(storage, value("a")) == 2


def test_a_main_file_holding_only_a_torn_header_opens_as_a_fresh_session(
    url: str, store: Path
) -> None:
    store.mkdir()
    _main(store).write_bytes(b'{"v":4,"kind":"session_hea')

    with _open(url) as storage:
        assert storage.commit([set_value(value("a"), 1)]).seqs == (1,)
    assert _lines(_main(store))[0] == _main_header()


def test_a_sidecar_holding_only_a_torn_header_is_removed_on_open(url: str, store: Path) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
    _sidecar(store).parent.mkdir()
    _sidecar(store).write_bytes(b'{"v":4,"kind":"scope_he')

    with _open(url) as storage:
        assert storage.read_list(FRAMES) == []
        assert storage.commit([append_list(FRAMES, "f")]).seqs == (2,)
    assert len(_lines(_sidecar(store))) == 2


def test_malformed_interior_sidecar_line_fails_open(url: str, store: Path) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
        storage.commit([append_list(FRAMES, "f2")])
    lines = _sidecar(store).read_bytes().split(b"\n")
    lines[1] = lines[1][:-5]
    _sidecar(store).write_bytes(b"\n".join(lines))

    with pytest.raises(StorageCorruptionError, match=r"scope-op-1\.scope: line 2"):
        _open(url)


def test_a_line_with_text_after_its_json_object_fails_open(url: str, store: Path) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
        storage.commit([set_value(value("a"), 2)])
    lines = _main(store).read_bytes().split(b"\n")
    lines[1] += b' {"kind":"txn"}'
    _main(store).write_bytes(b"\n".join(lines))

    with pytest.raises(StorageCorruptionError, match="line 2: unexpected text"):
        _open(url)


def test_malformed_interior_main_line_fails_open(url: str, store: Path) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
        storage.commit([set_value(value("a"), 2)])
    lines = _main(store).read_bytes().split(b"\n")
    lines[1] = b'{"kind":"txn","seqs":[1],"ts":1,"writes":[{"kind":"bogus"}]}'
    _main(store).write_bytes(b"\n".join(lines))

    with pytest.raises(StorageCorruptionError, match="unknown write kind 'bogus'"):
        _open(url)


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (_scope_header(session_id="other"), "session 'other'"),
        (_scope_header(scope_id="op-2"), "scope 'op-2'"),
    ],
)
def test_sidecar_header_identity_mismatch_fails_open(
    url: str, store: Path, header: dict[str, Any], match: str
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
    _, *records = _lines(_sidecar(store))
    _write_lines(_sidecar(store), [header, *records])

    with pytest.raises(StorageCorruptionError, match=match):
        _open(url)


def test_sidecar_record_naming_another_scope_fails_open(url: str, store: Path) -> None:
    _write_lines(_main(store), [_main_header()])
    _write_lines(_sidecar(store), [_scope_header(), _append_record(1, "x", scope_id="op-2")])

    with pytest.raises(StorageCorruptionError, match="scopeId 'op-2'"):
        _open(url)


def test_main_header_of_another_session_fails_open(url: str, store: Path) -> None:
    _write_lines(_main(store), [_main_header(session_id="s2")])

    with pytest.raises(StorageCorruptionError, match="session 's2'"):
        _open(url)


# -- failed writes ------------------------------------------------------------------------------


def _fail_writes_containing(monkeypatch: pytest.MonkeyPatch, marker: bytes) -> list[bytes]:
    """Writes holding `marker` land half their bytes, then fail like a full disk."""
    failed: list[bytes] = []
    real = sidecar_files.write_all

    def half_then_fail(fd: int, data: bytes) -> None:
        if marker in data:
            failed.append(data)
            os.write(fd, data[: len(data) // 2])
            raise OSError(28, "injected: no space left on device")
        real(fd, data)

    monkeypatch.setattr(sidecar_files, "write_all", half_then_fail)
    return failed


def test_failed_main_append_leaves_state_sequence_and_file_unchanged(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
        size = _main(store).stat().st_size
        failed = _fail_writes_containing(monkeypatch, b'"value":2')

        with pytest.raises(StorageUnavailableError, match="not applied"):
            storage.commit([set_value(value("a"), 2), insert_entry("e1", None, "message")])

        assert failed
        assert _main(store).stat().st_size == size
        assert _read(storage, value("a")) == 1
        assert storage.get_entries(["e1"]) == []
        assert storage.commit([set_value(value("a"), 3)]).seqs == (2,)
    with _open(url) as storage:
        assert _read(storage, value("a")) == 3


def test_failed_sidecar_append_leaves_no_partial_line_that_replays(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
        _fail_writes_containing(monkeypatch, b'"f2"')

        with pytest.raises(StorageUnavailableError):
            storage.commit([append_list(FRAMES, "f2")])

        assert _elements(storage) == [(1, "f1")]
        assert storage.commit([append_list(FRAMES, "f3")]).seqs == (2,)
    with _open(url) as storage:
        assert _elements(storage) == [(1, "f1"), (2, "f3")]


def _fail_next_truncate(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.ftruncate

    def fail_once(fd: int, size: int) -> None:
        calls.append(size)
        if len(calls) == 1:
            raise OSError(5, "injected: truncate failed")
        real(fd, size)

    monkeypatch.setattr(os, "ftruncate", fail_once)
    return calls


def test_a_failed_append_that_cannot_be_cut_off_at_once_is_cut_before_the_next_append(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
        size = _main(store).stat().st_size
        _fail_writes_containing(monkeypatch, b'"value":2')
        truncations = _fail_next_truncate(monkeypatch)

        with pytest.raises(StorageUnavailableError):
            storage.commit([set_value(value("a"), 2)])
        assert _main(store).stat().st_size > size  # the partial line is still there

        storage.commit([set_value(value("a"), 3)])
        assert truncations == [size, size]
    with _open(url) as storage:
        assert _read(storage, value("a")) == 3
        assert storage.commit([set_value(value("b"), 1)]).seqs == (3,)


def test_an_evicted_sidecar_with_an_uncut_failed_append_is_cut_when_written_again(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_module, "MAX_OPEN_SIDECARS", 1)
    other = value_list("frames", "r1", ephemeral_scope("op-2"))
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
        _fail_writes_containing(monkeypatch, b'"f2"')
        _fail_next_truncate(monkeypatch)
        with pytest.raises(StorageUnavailableError):
            storage.commit([append_list(FRAMES, "f2")])

        storage.commit([append_list(other, "b1")])  # evicts op-1's descriptor
        storage.commit([append_list(FRAMES, "f3")])
    with _open(url) as storage:
        assert _elements(storage) == [(1, "f1"), (3, "f3")]


def test_crash_before_the_retirement_commit_leaves_scoped_data_live(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1"), set_value(MEMO, "m")])
        _fail_writes_containing(monkeypatch, b'"retire"')

        with pytest.raises(StorageUnavailableError):
            storage.commit([set_value(value("op.state", "op-1"), "done"), retire_scope(OP)])

        assert _elements(storage) == [(1, "f1")]
        assert _sidecar(store).exists()
    with _open(url) as storage:
        assert _elements(storage) == [(1, "f1")]
        assert _read(storage, MEMO) == "m"
        assert storage.get_value(value("op.state", "op-1")) is None


# -- retirement cleanup -------------------------------------------------------------------------


def test_retirement_unlinks_the_sidecar_after_the_main_commit(url: str, store: Path) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
        storage.commit([retire_scope(OP)])

        assert not _sidecar(store).exists()
        assert storage.read_list(FRAMES) == []


def test_unlink_failure_does_not_fail_the_committed_retirement(
    url: str, store: Path, unlink_fails: list[str]
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
        result = storage.commit([set_value(value("op.state", "op-1"), "done"), retire_scope(OP)])

        assert result.seqs == (2, 3)
        assert unlink_fails == [str(_sidecar(store))]
        assert storage.read_list(FRAMES) == []
        assert _read(storage, value("op.state", "op-1")) == "done"


def test_crash_after_retirement_before_unlink_keeps_data_absent_and_reopen_cleans_up(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch, unlink_fails: list[str]
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1"), set_value(MEMO, "m")])
        storage.commit([retire_scope(OP)])
    assert _sidecar(store).exists()
    monkeypatch.undo()  # the next process can unlink again

    with _open(url) as storage:
        assert storage.read_list(FRAMES) == []
        assert storage.get_value(MEMO) is None
        assert not _sidecar(store).exists()
        assert storage.commit([set_value(value("a"), 1)]).seqs == (4,)


def test_cleanup_failure_on_reopen_is_not_fatal_and_keeps_data_absent(
    url: str, store: Path, unlink_fails: list[str]
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
        storage.commit([retire_scope(OP)])

    with _open(url) as storage:
        assert storage.read_list(FRAMES) == []
    assert unlink_fails == [str(_sidecar(store))] * 2
    assert _sidecar(store).exists()


def test_reuse_after_retirement_replays_only_records_after_the_boundary(
    url: str, store: Path, unlink_fails: list[str]
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "old"), set_value(MEMO, "old")])
        storage.commit([retire_scope(OP)])
        storage.commit([append_list(FRAMES, "new")])
    assert len(_lines(_sidecar(store))) == 3  # header, old lifetime, new lifetime

    with _open(url) as storage:
        assert _elements(storage) == [(4, "new")]
        assert storage.get_value(MEMO) is None


def test_multiple_retirement_cycles_choose_the_latest_boundary(
    url: str, unlink_fails: list[str]
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "life-1")])
        storage.commit([retire_scope(OP)])
        storage.commit([append_list(FRAMES, "life-2")])
        storage.commit([retire_scope(OP)])
        storage.commit([append_list(FRAMES, "life-3")])

    with _open(url) as storage:
        assert _elements(storage) == [(5, "life-3")]


def test_reopen_cleanup_uses_the_latest_boundary_of_several_cycles(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch, unlink_fails: list[str]
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "life-1")])
        storage.commit([retire_scope(OP)])
        storage.commit([append_list(FRAMES, "life-2")])
        storage.commit([retire_scope(OP)])
    monkeypatch.undo()

    with _open(url) as storage:
        assert storage.read_list(FRAMES) == []
    assert not _sidecar(store).exists()


def test_cleanup_never_deletes_a_sidecar_holding_a_reused_lifetime(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch, unlink_fails: list[str]
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "old")])
        storage.commit([retire_scope(OP)])
        storage.commit([append_list(FRAMES, "new")])
    monkeypatch.undo()

    with _open(url) as storage:
        assert _elements(storage) == [(3, "new")]
    assert _sidecar(store).exists()
    with _open(url) as storage:
        assert _elements(storage) == [(3, "new")]


def test_retiring_a_scope_that_was_never_written_needs_no_sidecar(url: str, store: Path) -> None:
    with _open(url) as storage:
        assert storage.commit([retire_scope(OP)]).seqs == (1,)
        assert storage.commit([append_list(FRAMES, "f")]).seqs == (2,)
    with _open(url) as storage:
        assert _elements(storage) == [(2, "f")]


def test_close_and_reopen_keeps_active_scope_progress_and_does_not_retire_it(
    url: str, store: Path
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1", tag="t"), set_value(MEMO, {"n": 1})])

    with _open(url) as storage:
        assert [(e.seq, e.value, e.tag) for e in storage.read_list(FRAMES)] == [(1, "f1", "t")]
        assert _read(storage, MEMO) == {"n": 1}
    assert all("retire" not in json.dumps(line) for line in _lines(_main(store)))
    assert _sidecar(store).exists()


def test_snapshot_for_forks_excludes_ephemeral_values_and_lists(url: str) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("cfg"), 1)])
        storage.commit([set_value(value("cfg", "", OP), 2), append_list(FRAMES, "f")])
        snap = storage.snapshot()

    assert [(v.address.scope, v.value) for v in snap.values] == [(SESSION_SCOPE, 1)]
    assert snap.lists == ()


# -- temp files, listing, deletion --------------------------------------------------------------


def test_temp_file_leftovers_are_never_discovered_and_are_removed_on_open(
    url: str, store: Path
) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
    temp = _scopes(store) / "scope-op-1.scope.0123abcd.tmp"
    _write_lines(temp, [_scope_header(), _append_record(2, "ghost")])
    main_temp = store / "s1.jsonl.0123abcd.tmp"
    main_temp.write_text(json.dumps(_main_header()) + "\n")

    with _open(url) as storage:
        assert storage.read_list(FRAMES) == []
        assert storage.commit([set_value(value("a"), 2)]).seqs == (2,)
    assert not temp.exists()
    assert not main_temp.exists()


def test_unrelated_files_in_the_sidecar_directory_are_ignored(url: str, store: Path) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
    (_scopes(store) / "notes.txt").write_text("not a sidecar")

    with _open(url) as storage:
        assert _elements(storage) == [(1, "f1")]
    assert (_scopes(store) / "notes.txt").exists()


def test_sidecars_and_temp_files_are_never_listed_as_sessions(url: str, store: Path) -> None:
    for session_id in ("s1", "s2"):
        with _open(url, session_id) as storage:
            storage.commit([append_list(FRAMES, "f1")])
    (store / "s3.jsonl.0123abcd.tmp").write_text("{}\n")
    (store / "stray.jsonl.scopes.jsonl").mkdir()

    assert open_repository(url).list_sessions() == ["s1", "s2"]


def test_repository_delete_removes_the_main_file_and_every_sidecar(url: str, store: Path) -> None:
    scope_b = ephemeral_scope("op-2")
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
        storage.commit([set_value(value("m", "", scope_b), 1)])
    with _open(url, "s2") as other:
        other.commit([append_list(FRAMES, "keep")])

    repo = open_repository(url)
    repo.delete_session("s1")

    assert not _main(store).exists()
    assert not _scopes(store).exists()
    assert repo.list_sessions() == ["s2"]
    assert _sidecar(store, session_id="s2").exists()
    with _open(url) as storage:
        assert storage.read_list(FRAMES) == []
        assert storage.commit([set_value(value("a"), 1)]).seqs == (1,)


def test_deleting_an_open_session_rejects_later_writes_through_old_handles(url: str) -> None:
    storage = _open(url)
    storage.commit([set_value(value("a"), 1)])

    open_repository(url).delete_session("s1")

    with pytest.raises(StorageClosedError, match="deleted"):
        storage.commit([set_value(value("a"), 2)])
    storage.close()
    assert open_repository(url).list_sessions() == []


def test_a_sidecar_directory_left_by_an_interrupted_delete_is_not_resurrected(
    url: str, store: Path
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
    _main(store).unlink()  # delete removes the main file first, then crashed

    with _open(url) as storage:
        assert storage.read_list(FRAMES) == []
    assert not _sidecar(store).exists()


# -- handles, threads, URL ----------------------------------------------------------------------


def test_two_handles_on_one_session_share_state_and_one_sequence(url: str) -> None:
    with _open(url) as first, _open(url) as second:
        first.commit([append_list(FRAMES, "a")])
        second.commit([append_list(FRAMES, "b")])
        first.commit([delete_value(MEMO)])

        assert _elements(first) == _elements(second) == [(1, "a"), (2, "b")]
        assert live_session_count() >= 1


def test_closing_one_handle_leaves_the_other_handle_of_the_session_usable(url: str) -> None:
    first, second = _open(url), _open(url)
    first.commit([append_list(FRAMES, "a")])
    first.close()

    assert second.commit([append_list(FRAMES, "b")]).seqs == (2,)
    assert second.commit([set_value(value("a"), 1)]).seqs == (3,)
    assert _elements(second) == [(1, "a"), (2, "b")]
    second.close()
    with _open(url) as storage:
        assert _elements(storage) == [(1, "a"), (2, "b")]
        assert storage.get_value(value("a")) is not None


def test_threads_committing_through_two_handles_never_share_a_sequence(url: str) -> None:
    handles = [_open(url), _open(url)]
    seqs: list[int] = []
    lock = threading.Lock()

    def work(worker: int) -> None:
        handle = handles[worker % 2]
        scope = ephemeral_scope(f"op-{worker % 3}")
        for i in range(50):
            target = value_list("frames", "r", scope) if i % 2 else value_list("log")
            got = handle.commit([append_list(target, [worker, i])]).seqs
            with lock:
                seqs.extend(got)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for handle in handles:
        handle.close()

    assert sorted(seqs) == list(range(1, 301))
    with _open(url) as storage:
        total = len(storage.read_list(value_list("log"), limit=10000))
        for n in range(3):
            total += len(storage.read_list(value_list("frames", "r", ephemeral_scope(f"op-{n}"))))
        assert total == 300


def test_the_next_open_after_the_last_close_rereads_the_files(url: str, store: Path) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
    _write_lines(_main(store), [_main_header(next_seq=7)])

    with _open(url) as storage:
        assert storage.get_value(value("a")) is None
        assert storage.commit([set_value(value("a"), 2)]).seqs == (7,)


def test_fsync_url_option_commits_and_reopens(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path}/durable?fsync=1"
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "f1")])
        storage.commit([retire_scope(OP), set_value(value("a"), 1)])
    with _open(url) as storage:
        assert storage.read_list(FRAMES) == []
        assert _read(storage, value("a")) == 1


@pytest.mark.parametrize(
    ("bad_url", "match"),
    [
        ("jsonl://host/dir", "absolute"),
        ("jsonl:///dir?fsync=maybe", "fsync must be 0 or 1"),
        ("jsonl:///dir?compress=1", "unknown option 'compress'"),
    ],
)
def test_malformed_jsonl_urls_are_rejected_naming_the_problem(bad_url: str, match: str) -> None:
    with pytest.raises(StorageValidationError, match=match):
        open_storage(bad_url, "s1")


def test_session_ids_that_could_escape_the_directory_are_rejected(url: str) -> None:
    with pytest.raises(StorageValidationError, match="session id"):
        open_storage(url, "../evil")


def test_a_crash_tearing_a_write_of_a_reused_lifetime_keeps_its_earlier_writes_and_the_boundary(
    url: str, store: Path, unlink_fails: list[str]
) -> None:
    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "old"), set_value(MEMO, "old")])
        storage.commit([retire_scope(OP)])  # unlink fails: the old lifetime stays on disk
        storage.commit([append_list(FRAMES, "new")])
        storage.commit([append_list(FRAMES, "torn")])
    path = _sidecar(store)
    path.write_bytes(path.read_bytes()[:-5])  # the crash cut the last transaction short

    with _open(url) as storage:
        assert _elements(storage) == [(4, "new")]
        assert storage.get_value(MEMO) is None
        # The torn transaction never committed, so its sequence may be allocated again.
        assert storage.commit([append_list(FRAMES, "after")]).seqs == (5,)
    with _open(url) as storage:
        assert _elements(storage) == [(4, "new"), (5, "after")]
        assert storage.get_value(MEMO) is None
