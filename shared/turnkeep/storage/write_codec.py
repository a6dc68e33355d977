"""The JSON codec of the value and list writes, for the two formats that store them as JSON.

A stored value or list write is its kind, address (`ns`, `key`), payload (the canonical JSON text
of the value or element) and optional tag. The formats spell these differently:

- a JSONL record write (docs/jsonl-format.md): `{"kind":"set|delete|append|delete_list","ns",
  "key"[,"value":<JSON>][,"tag"]}`, the payload spliced in as JSON;
- an S3 scoped-object write (docs/aws-storage.md): `{"op":"set|del|append|del_list","ns","key",
  "seq"[,"v":<JSON text>][,"tag"]}`, the payload a string of JSON text as in the DynamoDB items.

Both spellings stay: a reader already deployed parses only its own format's (a Lambda of the
previous release during a deploy, an older CLI on the same directory), so writing one format in
the other's spelling would make new data unreadable to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, Final, Literal, assert_never

from turnkeep.storage.addresses import Value, ValueList
from turnkeep.storage.jsonvalue import dump_compact
from turnkeep.storage.scopes import Scope
from turnkeep.storage.writes import AppendList, DeleteList, DeleteValue, ScopedWrite, SetValue

ScopedKind = Literal["set", "delete", "append", "delete_list"]
"""The value and list write kinds, named as JSONL records name them."""


class WriteFormatError(ValueError):
    """A stored write is malformed; the reader names where it was read from."""


class UnknownWriteError(WriteFormatError):
    """A stored write names a kind this build does not know."""


def _json_text(found: object) -> str:
    if not isinstance(found, str):
        raise WriteFormatError(f"a stored payload must be JSON text, got {found!r}")
    return found


@dataclass(frozen=True, slots=True)
class _Spelling:
    kind_field: str
    kinds: Mapping[str, ScopedKind]
    """Stored name -> kind."""
    payload_field: str
    payload_text: Callable[[Any], str]
    """The canonical JSON text of the payload field's content."""


_RECORD: Final = _Spelling(
    "kind",
    {"set": "set", "delete": "delete", "append": "append", "delete_list": "delete_list"},
    "value",
    # Re-serialized to the canonical form, so a replayed value equals the committed one.
    dump_compact,
)
_OBJECT: Final = _Spelling(
    "op",
    {"set": "set", "del": "delete", "append": "append", "del_list": "delete_list"},
    "v",
    _json_text,
)
_OBJECT_OPS: Final = {kind: name for name, kind in _OBJECT.kinds.items()}
RECORD_KINDS: Final = frozenset(_RECORD.kinds)
"""The `kind`s of JSONL record writes this module decodes."""


def _fields(write: ScopedWrite) -> tuple[ScopedKind, str | None, str | None]:
    """(kind, payload JSON text, tag) of a value or list write."""
    match write:
        case SetValue():
            return "set", write.value_json, None
        case DeleteValue():
            return "delete", None, None
        case AppendList():
            return "append", write.element_json, write.tag
        case DeleteList():
            return "delete_list", None, None
        case _:
            assert_never(write)


def text_field(item: Mapping[str, Any], name: str) -> str:
    """Field `name` of a stored write, which must be a string."""
    found = item.get(name)
    if not isinstance(found, str):
        raise WriteFormatError(f"write field {name!r} must be a string, got {found!r}")
    return found


def _decode(spelling: _Spelling, item: Mapping[str, Any], scope: Scope) -> ScopedWrite:
    name = text_field(item, spelling.kind_field)
    kind = spelling.kinds.get(name)
    if kind is None:
        raise UnknownWriteError(f"unknown write {spelling.kind_field} {name!r}")
    ns, key = text_field(item, "ns"), text_field(item, "key")
    match kind:
        case "set":
            return SetValue(
                Value(ns, key, scope), spelling.payload_text(item[spelling.payload_field])
            )
        case "delete":
            return DeleteValue(Value(ns, key, scope))
        case "append":
            tag = item.get("tag")
            if tag is not None and (not isinstance(tag, str) or tag == ""):
                raise WriteFormatError(f"list tag must be a non-empty string, got {tag!r}")
            payload = spelling.payload_text(item[spelling.payload_field])
            return AppendList(ValueList(ns, key, scope), payload, tag)
        case "delete_list":
            return DeleteList(ValueList(ns, key, scope))
        case _:
            assert_never(kind)


# -- JSONL record writes ------------------------------------------------------------------------


def encode_record_write(write: ScopedWrite) -> str:
    """A value or list write as one JSONL record write (splicing its canonical payload text)."""
    kind, payload, tag = _fields(write)
    text = (
        f'{{"kind":"{kind}","ns":{encode_basestring(write.address.namespace)},'
        f'"key":{encode_basestring(write.address.key)}'
    )
    if payload is not None:
        text += f',"value":{payload}'
    if tag is not None:
        text += f',"tag":{encode_basestring(tag)}'
    return text + "}"


def decode_record_write(item: Mapping[str, Any], scope: Scope) -> ScopedWrite:
    """The JSONL record write `item` (its `kind` in RECORD_KINDS), addressed in `scope`.

    Raises WriteFormatError, or KeyError when the value is missing."""
    return _decode(_RECORD, item, scope)


# -- S3 scoped-object writes --------------------------------------------------------------------


def encode_object_write(write: ScopedWrite, seq: int) -> dict[str, Any]:
    """A value or list write with its sequence, as one write of an S3 scoped object."""
    kind, payload, tag = _fields(write)
    item: dict[str, Any] = {
        "op": _OBJECT_OPS[kind],
        "ns": write.address.namespace,
        "key": write.address.key,
        "seq": seq,
    }
    if payload is not None:
        item["v"] = payload
    if tag is not None:
        item["tag"] = tag
    return item


def decode_object_write(item: Mapping[str, Any], scope: Scope) -> tuple[ScopedWrite, int]:
    """The write of an S3 scoped object and its sequence, addressed in `scope`.

    Raises UnknownWriteError for an unknown op, else KeyError, TypeError or ValueError when
    malformed."""
    seq = int(item["seq"])
    return _decode(_OBJECT, item, scope), seq
