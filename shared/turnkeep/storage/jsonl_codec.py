"""Line encoding of the JSONL backend: headers and transaction records (see jsonl.py).

Every line is one JSON object terminated by a newline. Encoding splices the canonical value
text the write constructors already produced, so a commit serializes each value once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, Final, assert_never

from turnkeep.storage.jsonvalue import dump_compact
from turnkeep.storage.scopes import (
    EphemeralScope,
    Scope,
    quote_scope_id,
    validate_scope_id,
)
from turnkeep.storage.write_codec import (
    RECORD_KINDS,
    WriteFormatError,
    decode_record_write,
    encode_record_write,
    text_field,
)
from turnkeep.storage.writes import (
    AppendList,
    DeleteList,
    DeleteValue,
    InsertEntry,
    InsertUsage,
    RetireScope,
    SetValue,
    Transaction,
    UsageRow,
    Write,
)

FORMAT_VERSION: Final = 5
"""5: usage rows hold integer `cost_micros`, `estimated` and the turn (`op`); see
docs/jsonl-format.md."""
READABLE_VERSIONS: Final = frozenset({4, FORMAT_VERSION})
"""A v4 file is read (its rows' float `cost_usd` becomes micro-dollars) and appended to."""
STORAGE_VERSION: Final = 1


class RecordError(ValueError):
    """A line is not a valid header or record; the reader adds the file and line number."""


_raw_decode = json.JSONDecoder().raw_decode


# -- headers ------------------------------------------------------------------------------------


def encode_session_header(session_id: str, next_seq: int) -> bytes:
    """First line of a main file; `nextSeq` is a floor for the session's next sequence."""
    header = {
        "v": FORMAT_VERSION,
        "kind": "session_header",
        "sessionId": session_id,
        "storageVersion": STORAGE_VERSION,
        "nextSeq": next_seq,
    }
    return (dump_compact(header) + "\n").encode("utf-8")


def encode_scope_header(session_id: str, scope_id: str) -> bytes:
    """First line of a sidecar (docs/jsonl-format.md, Files)."""
    header = {
        "v": FORMAT_VERSION,
        "kind": "scope_header",
        "sessionId": session_id,
        "scopeId": scope_id,
        "storageVersion": STORAGE_VERSION,
    }
    return (dump_compact(header) + "\n").encode("utf-8")


def _load_object(line: bytes) -> dict[str, Any]:
    try:
        text = line.decode("utf-8")
        # raw_decode skips the whitespace scans of loads(); lines we write have none.
        obj, end = _raw_decode(text)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise RecordError(f"not JSON: {exc}") from exc
    if end != len(text):
        raise RecordError(f"unexpected text after the JSON object at column {end + 1}")
    if not isinstance(obj, dict):
        raise RecordError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _check_version(obj: dict[str, Any], kind: str) -> None:
    if obj.get("kind") != kind:
        raise RecordError(f"expected a {kind} line, got kind {obj.get('kind')!r}")
    if obj.get("v") not in READABLE_VERSIONS or obj.get("storageVersion") != STORAGE_VERSION:
        raise RecordError(
            f"unsupported format v={obj.get('v')!r} storageVersion={obj.get('storageVersion')!r};"
            f" this build reads v={sorted(READABLE_VERSIONS)} storageVersion={STORAGE_VERSION}"
        )


def parse_session_header(line: bytes, session_id: str) -> int:
    """Validate a main header for `session_id`; return its `nextSeq`."""
    obj = _load_object(line)
    _check_version(obj, "session_header")
    if obj.get("sessionId") != session_id:
        raise RecordError(f"header names session {obj.get('sessionId')!r}, expected {session_id!r}")
    next_seq = obj.get("nextSeq")
    if type(next_seq) is not int or next_seq < 1:
        raise RecordError(f"header nextSeq must be an int >= 1, got {next_seq!r}")
    return next_seq


def parse_scope_header(line: bytes, session_id: str, quoted_scope_id: str) -> str:
    """Validate a sidecar header against the session and the file's name; return the scope id."""
    obj = _load_object(line)
    _check_version(obj, "scope_header")
    if obj.get("sessionId") != session_id:
        raise RecordError(
            f"sidecar header names session {obj.get('sessionId')!r}, expected {session_id!r}"
        )
    scope_id = obj.get("scopeId")
    if not isinstance(scope_id, str) or quote_scope_id(scope_id) != quoted_scope_id:
        raise RecordError(
            f"sidecar header names scope {scope_id!r}, which does not match the file name"
        )
    try:
        return validate_scope_id(scope_id)
    except ValueError as exc:  # InvalidScopeError: a file this backend never wrote
        raise RecordError(f"sidecar header names an unusable scope id: {exc}") from exc


# -- transaction records ------------------------------------------------------------------------


def _encode_write(write: Write) -> str:
    match write:
        case SetValue() | DeleteValue() | AppendList() | DeleteList():
            return encode_record_write(write)
        case RetireScope():
            return f'{{"kind":"scope","op":"retire","scopeId":{encode_basestring(write.scope.id)}}}'
        case InsertEntry():
            parent = "null" if write.parent_id is None else encode_basestring(write.parent_id)
            return (
                f'{{"kind":"entry","id":{encode_basestring(write.id)},"parentId":{parent},'
                f'"type":{encode_basestring(write.type)},"data":{write.data_json}}}'
            )
        case InsertUsage():
            return f'{{"kind":"usage","row":{dump_compact(write.row.to_json())}}}'
        case _:
            assert_never(write)


def encode_transaction(txn: Transaction, seqs: Sequence[int], ts: int) -> bytes:
    """One committed transaction as one line; scoped ones carry their scope id."""
    scope = ""
    if isinstance(txn.scope, EphemeralScope):
        scope = f'"scopeId":{encode_basestring(txn.scope.id)},'
    writes = ",".join(_encode_write(w) for w in txn.writes)
    seq_text = ",".join(map(str, seqs))
    line = f'{{"kind":"txn",{scope}"seqs":[{seq_text}],"ts":{ts},"writes":[{writes}]}}\n'
    return line.encode("utf-8")


@dataclass(slots=True)
class Record:
    """A parsed transaction line whose writes are decoded only if it is replayed."""

    seqs: list[int]
    scope_id: str | None
    body: dict[str, Any]

    @property
    def first(self) -> int:
        """The transaction's first sequence."""
        return self.seqs[0]

    @property
    def last(self) -> int:
        """The transaction's last sequence."""
        return self.seqs[-1]


def parse_record(line: bytes) -> Record:
    """Parse and validate the envelope of a transaction line (seqs, scope id, write count)."""
    obj = _load_object(line)
    if obj.get("kind") != "txn":
        raise RecordError(f"expected a txn record, got kind {obj.get('kind')!r}")
    seqs = obj.get("seqs")
    writes = obj.get("writes")
    if not isinstance(seqs, list) or not seqs or not isinstance(writes, list):
        raise RecordError("a txn record needs a non-empty 'seqs' list and a 'writes' list")
    if len(seqs) != len(writes):
        raise RecordError(f"{len(seqs)} seqs for {len(writes)} writes")
    previous = 0
    for seq in seqs:
        if type(seq) is not int or seq <= previous:
            raise RecordError(f"seqs must be strictly increasing ints >= 1, got {seqs!r}")
        previous = seq
    scope_id = obj.get("scopeId")
    if scope_id is not None and not isinstance(scope_id, str):
        raise RecordError(f"scopeId must be a string, got {scope_id!r}")
    if type(obj.get("ts")) is not int:
        raise RecordError(f"ts must be an int, got {obj.get('ts')!r}")
    return Record(seqs, scope_id, obj)


def _decode_write(item: object, scope: Scope) -> Write:
    if not isinstance(item, dict):
        raise RecordError(f"a write must be a JSON object, got {item!r}")
    kind = item.get("kind")
    if kind in RECORD_KINDS:
        return decode_record_write(item, scope)
    if isinstance(scope, EphemeralScope):
        raise RecordError(f"write kind {kind!r} is not allowed in a scoped transaction")
    match kind:
        case "scope":
            if item.get("op") != "retire":
                raise RecordError(f"unknown scope op {item.get('op')!r}")
            return RetireScope(EphemeralScope(validate_scope_id(item.get("scopeId"))))
        case "entry":
            parent = item.get("parentId")
            if parent is not None and not isinstance(parent, str):
                raise RecordError(f"entry parentId must be a string or null, got {parent!r}")
            return InsertEntry(
                text_field(item, "id"), parent, text_field(item, "type"), dump_compact(item["data"])
            )
        case "usage":
            row = item.get("row")
            if not isinstance(row, dict):
                raise RecordError(f"usage row must be an object, got {row!r}")
            return InsertUsage(UsageRow.from_json(row))
    raise RecordError(f"unknown write kind {kind!r}")


def decode_writes(record: Record, scope: Scope) -> list[Write]:
    """The record's writes, addressed in `scope` (the session scope for main-log records)."""
    try:
        return [_decode_write(item, scope) for item in record.body["writes"]]
    except RecordError:
        raise
    except WriteFormatError as exc:
        raise RecordError(str(exc)) from exc
    except (KeyError, TypeError, ValueError) as exc:
        # KeyError: missing "value"/"data"; ValueError: NaN or an invalid scope id.
        raise RecordError(f"malformed write: {exc!r}") from exc
