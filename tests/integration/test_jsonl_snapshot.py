"""JSONL snapshots (docs/jsonl-format.md, Snapshot): written at the last close once the main log
has grown enough, used on open only when it checks out against the log, and otherwise ignored
with the whole log replayed — a snapshot never changes what a session holds."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from turnkeep.storage import (
    SESSION_SCOPE,
    StorageCorruptionError,
    UsageRow,
    append_list,
    delete_list,
    delete_value,
    ephemeral_scope,
    insert_entry,
    insert_usage,
    jsonl_replay,
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
from turnkeep.storage.jsonl_snapshot import MainLog

OP = ephemeral_scope("op-1")
FRAMES = value_list("frames", "r1", OP)
MEMO = value("memo", "tool-1", OP)
EVENTS = value_list("events")


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


@pytest.fixture
def snapshot_every_close(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every close after any growth of the main log writes a snapshot."""
    monkeypatch.setattr(jsonl_module, "SNAPSHOT_MIN_BYTES", 1)
    monkeypatch.setattr(jsonl_module, "SNAPSHOT_GROWTH", 1 << 62)


@pytest.fixture
def parsed_lines(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every record line open parses (main log and sidecars)."""
    seen: list[bytes] = []
    parse = jsonl_replay.parse_record

    def spy(line: bytes) -> Any:
        seen.append(line)
        return parse(line)

    monkeypatch.setattr(jsonl_replay, "parse_record", spy)
    return seen


def _open(url: str, session_id: str = "s1") -> JsonlStorage:
    storage = open_storage(url, session_id)
    assert isinstance(storage, JsonlStorage)
    return storage


def _main(store: Path, session_id: str = "s1") -> Path:
    return store / f"{session_id}.jsonl"


def _snapshot(store: Path, session_id: str = "s1") -> Path:
    return store / f"{session_id}.jsonl.snapshot"


def _sidecar(store: Path, scope_id: str = "op-1") -> Path:
    return store / "s1.jsonl.scopes" / f"scope-{scope_id}.scope"


def _header(path: Path) -> dict[str, Any]:
    header: dict[str, Any] = json.loads(path.read_bytes().split(b"\n", 1)[0])
    return header


def _fill(storage: JsonlStorage, start: int = 0, count: int = 5) -> None:
    """Commits of every main-log write kind, plus scoped work in a sidecar."""
    for i in range(start, start + count):
        parent = None if i == 0 else f"m{i - 1}"
        storage.commit(
            [
                set_value(value("cfg", f"k{i % 3}"), {"i": i, "text": "é ☃"}),
                append_list(EVENTS, {"i": i}, tag="turn" if i % 2 else None),
                insert_entry(f"m{i}", parent, "message" if i % 2 else "note", {"i": i}),
                insert_usage(
                    UsageRow(input_tokens=i, output_tokens=1, cost_micros=100_000, model="m")
                ),
            ]
        )
        storage.commit([append_list(FRAMES, f"f{i}"), set_value(MEMO, i)])
    storage.commit([delete_value(value("cfg", "k0"))])


def _view(storage: JsonlStorage) -> dict[str, Any]:
    """Everything the session holds, as its readers see it, and its next sequence."""
    return {
        "snapshot": storage.snapshot(),
        "stats": storage.get_stats(),
        "entries": storage.scan_entries(),
        "entries after 7": storage.scan_entries(after_seq=7, limit=2),
        "get": storage.get_entries(["m3", "nope", "m1"]),
        "scoped values": storage.scan_values("memo", scope=OP),
        "scoped list": storage.read_list(FRAMES),
        "session values": storage.scan_values("cfg", scope=SESSION_SCOPE),
        "events desc": storage.read_list(EVENTS, order="desc", limit=3),
        "next seq": storage._session.state.next_seq,
    }


def _view_without_snapshot(url: str, store: Path) -> dict[str, Any]:
    """The view a full replay of the logs gives (the snapshot moved aside, then put back)."""
    aside = store / "aside.snapshot"
    shutil.move(_snapshot(store), aside)
    try:
        with _open(url) as storage:
            assert storage._session.snapshot_bytes == 0
            return _view(storage)
    finally:
        shutil.move(aside, _snapshot(store))


# -- writing ------------------------------------------------------------------------------------


def test_a_small_session_writes_no_snapshot(url: str, store: Path) -> None:
    with _open(url) as storage:
        _fill(storage)

    assert not _snapshot(store).exists()


def test_the_last_close_writes_a_snapshot_once_the_log_passes_the_threshold(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_module, "SNAPSHOT_MIN_BYTES", 2_000)
    first = _open(url)
    second = _open(url)
    _fill(first)
    first.close()
    assert not _snapshot(store).exists(), "only the last close of the session writes one"
    _fill(second, start=5, count=10)
    second.close()

    header = _header(_snapshot(store))
    size = _main(store).stat().st_size
    assert size >= 2_000
    assert header["sessionId"] == "s1"
    assert header["logBytes"] == size
    assert header["logLines"] == len(_main(store).read_bytes().splitlines())
    assert not list(store.glob("*.tmp"))


def test_a_snapshot_is_rewritten_only_after_the_log_grows_by_a_step(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_module, "SNAPSHOT_MIN_BYTES", 1)
    monkeypatch.setattr(jsonl_module, "SNAPSHOT_GROWTH", 2)
    with _open(url) as storage:
        _fill(storage, count=4)
    covered = _header(_snapshot(store))["logBytes"]

    with _open(url) as storage:
        storage.commit([set_value(value("cfg", "small"), 1)])
    assert _header(_snapshot(store))["logBytes"] == covered, "grew by less than half"

    with _open(url) as storage:
        _fill(storage, start=4, count=4)
    assert _header(_snapshot(store))["logBytes"] == _main(store).stat().st_size


@pytest.mark.usefixtures("snapshot_every_close")
def test_a_failed_snapshot_write_is_logged_and_close_still_succeeds(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(path: str, content: bytes, *, fsync: bool) -> None:
        raise OSError(f"injected: cannot create {path}")

    storage = _open(url)
    _fill(storage)
    monkeypatch.setattr(sidecar_files, "create_atomically", refuse)
    with caplog.at_level(logging.WARNING):
        storage.close()

    assert "could not write snapshot" in caplog.text
    assert not _snapshot(store).exists()
    monkeypatch.undo()
    with _open(url) as storage:
        assert len(storage.scan_entries()) == 5


@pytest.mark.usefixtures("snapshot_every_close")
def test_no_snapshot_is_written_after_a_failed_append_that_could_not_be_cut_off(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = _open(url)
    _fill(storage)

    def fail_write(fd: int, data: bytes) -> None:
        raise OSError("injected: disk full")

    def fail_truncate(fd: int, size: int) -> None:
        raise OSError("injected: cannot truncate")

    monkeypatch.setattr(sidecar_files, "write_all", fail_write)
    monkeypatch.setattr(sidecar_files.os, "ftruncate", fail_truncate)
    with pytest.raises(Exception, match="disk full"):
        storage.commit([set_value(value("cfg", "lost"), 1)])
    monkeypatch.undo()
    storage.close()

    assert not _snapshot(store).exists()


def test_deleting_a_session_removes_its_snapshot_and_a_new_one_starts_empty(
    url: str, store: Path, snapshot_every_close: None
) -> None:
    with _open(url) as storage:
        _fill(storage)
    assert _snapshot(store).exists()

    open_repository(url).delete_session("s1")

    assert not _snapshot(store).exists()
    with _open(url) as storage:
        assert storage.scan_entries() == []


@pytest.mark.usefixtures("snapshot_every_close")
def test_a_snapshot_left_without_its_main_log_is_removed_on_open(url: str, store: Path) -> None:
    with _open(url) as storage:
        _fill(storage)
    _main(store).unlink()  # an interrupted delete

    with _open(url) as storage:
        assert storage.scan_entries() == []
        assert not _snapshot(store).exists()


# -- use ----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("snapshot_every_close")
def test_open_restores_from_the_snapshot_and_parses_no_main_record(
    url: str, store: Path, parsed_lines: list[bytes]
) -> None:
    with _open(url) as storage:
        _fill(storage)
    parsed_lines.clear()

    with _open(url) as storage:
        assert storage._session.snapshot_bytes == _main(store).stat().st_size
        view = _view(storage)

    # Only the sidecar's records were parsed: sidecars are always replayed from their files.
    assert parsed_lines
    assert all(b'"scopeId":"op-1"' in line for line in parsed_lines)
    assert view == _view_without_snapshot(url, store)


@pytest.mark.usefixtures("snapshot_every_close")
def test_records_after_the_snapshot_are_replayed_on_top_of_it(
    url: str, store: Path, parsed_lines: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    with _open(url) as storage:
        _fill(storage)
    covered = _snapshot(store).read_bytes()
    # A crash after more commits but before the next snapshot: the old snapshot stays.
    with _open(url) as storage:
        _fill(storage, start=5, count=3)
        storage.commit([delete_list(EVENTS), retire_scope(OP)])
        storage.commit([append_list(FRAMES, "after retirement")])
    _snapshot(store).write_bytes(covered)
    parsed_lines.clear()

    with _open(url) as storage:
        assert storage._session.snapshot_bytes == _header(_snapshot(store))["logBytes"]
        view = _view(storage)
        main_lines = [line for line in parsed_lines if line.startswith(b'{"kind":"txn","seqs"')]

    assert len(main_lines) == 3 + 1 + 1  # the entry commits, the delete, the retirement
    assert view == _view_without_snapshot(url, store)
    assert [e.value for e in view["scoped list"]] == ["after retirement"]


@pytest.mark.usefixtures("snapshot_every_close")
def test_a_torn_final_line_after_the_snapshot_is_cut_off(url: str, store: Path) -> None:
    with _open(url) as storage:
        _fill(storage)
    with _main(store).open("ab") as handle:
        handle.write(b'{"kind":"txn","seqs":[99],"ts":1,"writes":[{"kind":"delete"')

    with _open(url) as storage:
        assert storage._session.snapshot_bytes > 0
        assert len(storage.scan_entries()) == 5
        assert storage.commit([set_value(value("cfg", "next"), 1)]).first_seq == 5 * 6 + 2
    assert _main(store).read_bytes().endswith(b"\n")


@pytest.mark.usefixtures("snapshot_every_close")
def test_a_retirement_covered_by_the_snapshot_still_hides_its_sidecar_records(
    url: str, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: str) -> None:
        raise PermissionError(f"injected: cannot unlink {path}")

    with _open(url) as storage:
        storage.commit([append_list(FRAMES, "old"), set_value(MEMO, "old")])
        monkeypatch.setattr(sidecar_files, "remove_file", refuse)
        storage.commit([retire_scope(OP)])  # the unlink fails: the sidecar stays
    monkeypatch.undo()
    assert _sidecar(store).exists()

    with _open(url) as storage:
        assert storage._session.snapshot_bytes > 0
        assert storage.read_list(FRAMES) == []
        assert storage.get_value(MEMO) is None
        assert not _sidecar(store).exists(), "open removes a sidecar holding only retired records"
        assert storage.commit([append_list(FRAMES, "new")]).seqs == (4,)
        assert [e.value for e in storage.read_list(FRAMES)] == ["new"]


@pytest.mark.usefixtures("snapshot_every_close")
def test_a_sidecar_record_holding_a_sequence_the_snapshot_covers_fails_open(
    url: str, store: Path
) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
        storage.commit([set_value(value("b"), 2), set_value(value("c"), 3)])
        storage.commit([append_list(FRAMES, "f")])
    # Forge a sidecar record at seq 2, which the main log's second record holds.
    sidecar = _sidecar(store)
    lines = sidecar.read_bytes().splitlines(keepends=True)
    sidecar.write_bytes(lines[0] + lines[1].replace(b'"seqs":[4]', b'"seqs":[2]'))

    with pytest.raises(StorageCorruptionError, match=r"scope-op-1\.scope: line 2: seq 2"):
        _open(url)
    _snapshot(store).unlink()
    with pytest.raises(StorageCorruptionError, match="seq 2"):
        _open(url)


# -- rejection ----------------------------------------------------------------------------------


def _rejected_then_replayed(
    url: str, store: Path, caplog: pytest.LogCaptureFixture, reason: str
) -> dict[str, Any]:
    """Open; the snapshot must be ignored (logged with `reason`) and removed."""
    with caplog.at_level(logging.WARNING), _open(url) as storage:
        assert storage._session.snapshot_bytes == 0
        view = _view(storage)
        assert not _snapshot(store).exists(), "a rejected snapshot is removed"
    assert "ignoring snapshot" in caplog.text
    assert reason in caplog.text
    return view


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        pytest.param(lambda c: c[: len(c) // 2], "torn", id="torn-in-half"),
        # an empty file: the rename landed before the data (no fsync)
        pytest.param(lambda c: c[:0], "torn", id="empty"),
        pytest.param(lambda c: c[:-2], "torn", id="last-byte-and-newline-lost"),
        pytest.param(lambda c: c.replace(b'"m3"', b'"mX"'), "body checksum", id="body-altered"),
    ],
)
@pytest.mark.usefixtures("snapshot_every_close")
def test_a_damaged_snapshot_is_ignored_and_the_log_replayed(
    url: str,
    store: Path,
    caplog: pytest.LogCaptureFixture,
    damage: Callable[[bytes], bytes],
    reason: str,
) -> None:
    with _open(url) as storage:
        _fill(storage)
        expected = _view(storage)
    _snapshot(store).write_bytes(damage(_snapshot(store).read_bytes()))

    assert _rejected_then_replayed(url, store, caplog, reason) == expected


@pytest.mark.usefixtures("snapshot_every_close")
def test_a_snapshot_of_a_log_that_was_cut_shorter_is_ignored(
    url: str, store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _open(url) as storage:
        _fill(storage)
    # A power loss with fsync=0 lost the log's last records but kept the (fsynced) snapshot.
    lines = _main(store).read_bytes().splitlines(keepends=True)
    _main(store).write_bytes(b"".join(lines[:-2]))

    view = _rejected_then_replayed(url, store, caplog, "not a line boundary")
    assert len(view["entries"]) == 4


@pytest.mark.usefixtures("snapshot_every_close")
def test_a_snapshot_of_a_log_rewritten_to_the_same_length_is_ignored(
    url: str, store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _open(url) as storage:
        _fill(storage)
    data = _main(store).read_bytes()
    altered = data.replace(b'"i":3}', b'"i":4}')
    assert altered != data
    assert len(altered) == len(data)
    _main(store).write_bytes(altered)

    view = _rejected_then_replayed(url, store, caplog, "first bytes differ")
    assert [e.data for e in view["entries"]][3] == {"i": 4}


@pytest.mark.usefixtures("snapshot_every_close")
def test_a_snapshot_at_a_line_boundary_of_a_longer_rewritten_log_is_ignored(
    url: str, store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
    old_life = _snapshot(store).read_bytes()
    open_repository(url).delete_session("s1")
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 2)])  # a line of the same length
        _fill(storage)
        expected = _view(storage)
    # The old life's snapshot comes back (say, restored from a backup) over the new log.
    _snapshot(store).write_bytes(old_life)
    assert _main(store).read_bytes()[_header(_snapshot(store))["logBytes"] - 1 :][:1] == b"\n"

    view = _rejected_then_replayed(url, store, caplog, "first bytes differ")
    assert view == expected


@pytest.mark.usefixtures("snapshot_every_close")
def test_a_snapshot_of_another_session_is_ignored(
    url: str, store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _open(url, "s2") as storage:
        _fill(storage)
    shutil.copy(_main(store, "s2"), _main(store))
    _main(store).write_bytes(_main(store).read_bytes().replace(b'"s2"', b'"s1"', 1))
    shutil.copy(_snapshot(store, "s2"), _snapshot(store))

    view = _rejected_then_replayed(url, store, caplog, "names session 's2'")
    assert len(view["entries"]) == 5


@pytest.mark.parametrize(
    "case",
    [
        ("v", 99, "v=99"),
        ("kind", "other", "kind 'other'"),
        ("logBytes", 10**12, "not a line boundary"),
        ("logBytes", 0, "not a line boundary"),
        ("logBytes", "12", "not a line boundary"),
    ],
)
@pytest.mark.usefixtures("snapshot_every_close")
def test_a_snapshot_with_a_header_this_build_cannot_use_is_ignored(
    url: str, store: Path, caplog: pytest.LogCaptureFixture, case: tuple[str, object, str]
) -> None:
    field, bad, reason = case
    with _open(url) as storage:
        _fill(storage)
        expected = _view(storage)
    header_line, body = _snapshot(store).read_bytes().split(b"\n", 1)
    header = json.loads(header_line)
    header[field] = bad
    _snapshot(store).write_bytes(json.dumps(header).encode() + b"\n" + body)

    assert _rejected_then_replayed(url, store, caplog, reason) == expected


def test_a_leftover_snapshot_temp_file_is_removed_on_open(url: str, store: Path) -> None:
    with _open(url) as storage:
        storage.commit([set_value(value("a"), 1)])
    temp = store / "s1.jsonl.snapshot.0123abcd.tmp"
    temp.write_bytes(b"{")

    with _open(url) as storage:
        assert storage.get_value(value("a")) is not None
    assert not temp.exists()


# -- sequence spans -----------------------------------------------------------------------------


def test_main_log_spans_merge_touching_records_and_find_any_overlap() -> None:
    main = MainLog()
    for first, last in [(1, 2), (3, 3), (6, 8), (9, 9), (12, 15)]:
        main.add(first, last)

    assert (main.run_firsts, main.run_lasts) == ([1, 6, 12], [3, 9, 15])
    assert main.lines == 6
    assert main.last_seq == 15
    held = {1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15}
    for first in range(0, 18):
        for last in range(first, 18):
            expected = any(first <= seq <= last for seq in held)
            assert main.holds_any(first, last) == expected, (first, last)
    assert not MainLog().holds_any(1, 100)
