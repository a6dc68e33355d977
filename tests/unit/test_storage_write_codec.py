"""Stored writes stay readable: the JSONL record and S3 object spellings, as written before."""

from __future__ import annotations

import pytest

from turnkeep.storage import (
    SESSION_SCOPE,
    StorageCorruptionError,
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
from turnkeep.storage.aws.codec import decode_object, encode_object
from turnkeep.storage.aws.scoped import ScopeView, object_writes
from turnkeep.storage.jsonl_codec import (
    decode_writes,
    encode_transaction,
    parse_record,
)
from turnkeep.storage.writes import UsageRow, Write, build_transaction, insert_usage

SCOPE = ephemeral_scope("op/1")

# Lines and bodies exactly as the backends wrote them before the write codecs were merged
# (docs/jsonl-format.md, docs/aws-storage.md); never regenerate them from the current encoder.
MAIN_LINE = (
    '{"kind":"txn","seqs":[5,6,7,8,9,10,11,12,13],"ts":1764520000000,"writes":['
    '{"kind":"set","ns":"cfg","key":"ké","value":{"a":[1,2.5,null],"b":"x\\"y"}},'
    '{"kind":"delete","ns":"cfg","key":"gone"},'
    '{"kind":"append","ns":"log","key":"l","value":"e1","tag":"t"},'
    '{"kind":"append","ns":"log","key":"l","value":{"n":2}},'
    '{"kind":"delete_list","ns":"log","key":"old"},'
    '{"kind":"scope","op":"retire","scopeId":"op/1"},'
    '{"kind":"entry","id":"e1","parentId":null,"type":"message","data":{"text":"hi"}},'
    '{"kind":"entry","id":"e2","parentId":"e1","type":"note","data":null},'
    '{"kind":"usage","row":{"input_tokens":1,"output_tokens":2,"cache_read_tokens":3,'
    '"cache_write_tokens":4,"cost_usd":0.5,"model":"m"}}]}\n'
).encode()
# Format v5 (docs/jsonl-format.md): the usage row's cost is integer micro-dollars, and the row
# says whether its counts were estimated and which turn it belongs to.
MAIN_LINE_V5 = MAIN_LINE.replace(
    b'"cost_usd":0.5,"model":"m"}', b'"cost_micros":500000,"model":"m","estimated":false,"op":null}'
)
SIDECAR_LINE = (
    b'{"kind":"txn","scopeId":"op/1","seqs":[3,4,5,6,7],"ts":1764520000050,"writes":['
    b'{"kind":"append","ns":"frames","key":"r1","value":"f1","tag":"t"},'
    b'{"kind":"set","ns":"memo","key":"x","value":3},'
    b'{"kind":"delete","ns":"memo","key":"y"},'
    b'{"kind":"delete_list","ns":"frames","key":"r0"},'
    b'{"kind":"append","ns":"frames","key":"r1","value":[true]}]}\n'
)
OBJECT_BODY = (
    b'{"v":1,"session":"s1","scope":"op/1","writes":['
    b'{"op":"append","ns":"frames","key":"r1","seq":3,"v":"\\"f1\\"","tag":"t"},'
    b'{"op":"set","ns":"memo","key":"x","seq":4,"v":"3"},'
    b'{"op":"del","ns":"memo","key":"y","seq":5},'
    b'{"op":"del_list","ns":"frames","key":"r0","seq":6},'
    b'{"op":"append","ns":"frames","key":"r1","seq":7,"v":"[true]"}]}'
)

MAIN_WRITES: list[Write] = [
    set_value(value("cfg", "ké"), {"a": [1, 2.5, None], "b": 'x"y'}),
    delete_value(value("cfg", "gone")),
    append_list(value_list("log", "l"), "e1", tag="t"),
    append_list(value_list("log", "l"), {"n": 2}),
    delete_list(value_list("log", "old")),
    retire_scope(SCOPE),
    insert_entry("e1", None, "message", {"text": "hi"}),
    insert_entry("e2", "e1", "note"),
    insert_usage(UsageRow(1, 2, 3, 4, 500_000, "m")),
]
SCOPED_WRITES: list[Write] = [
    append_list(value_list("frames", "r1", SCOPE), "f1", tag="t"),
    set_value(value("memo", "x", SCOPE), 3),
    delete_value(value("memo", "y", SCOPE)),
    delete_list(value_list("frames", "r0", SCOPE)),
    append_list(value_list("frames", "r1", SCOPE), [True]),
]


def test_an_old_main_log_line_decodes_to_its_writes_with_its_float_cost_as_micro_dollars() -> None:
    record = parse_record(MAIN_LINE.rstrip(b"\n"))
    assert record.seqs == list(range(5, 14))
    assert decode_writes(record, SESSION_SCOPE) == MAIN_WRITES


def test_a_main_log_line_is_written_in_format_5_and_decodes_to_the_same_writes() -> None:
    txn = build_transaction(MAIN_WRITES)
    line = encode_transaction(txn, range(5, 14), 1764520000000)

    assert line == MAIN_LINE_V5
    assert decode_writes(parse_record(line.rstrip(b"\n")), SESSION_SCOPE) == MAIN_WRITES


def test_an_old_sidecar_line_decodes_to_its_writes_and_is_still_written_the_same() -> None:
    record = parse_record(SIDECAR_LINE.rstrip(b"\n"))
    assert record.scope_id == "op/1"
    assert decode_writes(record, SCOPE) == SCOPED_WRITES
    txn = build_transaction(SCOPED_WRITES)
    assert encode_transaction(txn, range(3, 8), 1764520000050) == SIDECAR_LINE


def test_an_old_scoped_object_replays_and_is_still_written_the_same() -> None:
    writes = decode_object(OBJECT_BODY, key="k", session_id="s1", scope_id="op/1")
    view = ScopeView(SCOPE, boundary=0)
    assert view.apply("k", writes)
    state = view.state
    stored = state.get_value(value("memo", "x", SCOPE))
    assert stored is not None
    assert (stored.value, stored.seq) == (3, 4)
    elements = state.read_list(value_list("frames", "r1", SCOPE), None, "asc", 10)
    assert [(e.seq, e.value, e.tag) for e in elements] == [(3, "f1", "t"), (7, [True], None)]
    assert state.read_list(value_list("frames", "r0", SCOPE), None, "asc", 10) == []
    body = encode_object("s1", "op/1", object_writes(tuple(SCOPED_WRITES), tuple(range(3, 8))))
    assert body == OBJECT_BODY


def test_an_object_write_of_an_unknown_op_is_corruption_naming_it() -> None:
    body = OBJECT_BODY.replace(b'"op":"del"', b'"op":"drop"')
    writes = decode_object(body, key="k", session_id="s1", scope_id="op/1")
    with pytest.raises(StorageCorruptionError, match="holds unknown write op 'drop'"):
        ScopeView(SCOPE, boundary=0).apply("k", writes)
