"""Key design: DynamoDB sort keys of one session partition and S3 object keys.

Every storage item of a session lives in partition `SESSION#{session_id}` with a sort key
starting `S#` (the session envelope of issue #4 shares the partition at `ENVELOPE`):

    S#HEAD                              sequence head: last_seq, stats, pending cleanups
    S#V#{ns}#{key}                      session value
    S#L#{ns}#{key}#{seq:020d}           session list element
    S#LM#{ns}#{key}                     session list tombstone (deleted_through)
    S#E#{seq:020d}                      transcript entry, in sequence order
    S#EI#{entry id}                     entry id index -> seq (duplicate and parent checks)
    S#U#{seq:020d}                      usage row
    S#R#{scope id}                      latest retirement boundary of an ephemeral scope

Free-text parts are escaped ('%' -> %25, '#' -> %23) so '#' always separates parts; the
escape works character by character, so a key prefix maps to a sort-key prefix.
Scoped transactions are S3 objects `{prefix}/sessions/{sid}/scopes/{quoted id}/{seq:020d}.json`.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import unquote

from turnkeep.storage.scopes import quote_scope_id

SEQ_DIGITS: Final = 20
HEAD_SK: Final = "S#HEAD"
STORAGE_SK_PREFIX: Final = "S#"
VALUE_PREFIX: Final = "S#V#"
LIST_PREFIX: Final = "S#L#"
LIST_TOMBSTONE_PREFIX: Final = "S#LM#"
ENTRY_PREFIX: Final = "S#E#"
ENTRY_INDEX_PREFIX: Final = "S#EI#"
USAGE_PREFIX: Final = "S#U#"
RETIREMENT_PREFIX: Final = "S#R#"
SESSIONS_GSI: Final = "gsi1"
SESSIONS_GSI_PK: Final = "TURNKEEP#STORAGE#SESSIONS"
"""gsi1pk of every head item: list_sessions queries this one gsi1 partition."""
MAX_SORT_KEY_BYTES: Final = 1024


def escape(part: str) -> str:
    """Escape '%' and '#' so a part can sit between '#' separators."""
    return part.replace("%", "%25").replace("#", "%23")


def unescape(part: str) -> str:
    """Inverse of escape."""
    return unquote(part)


def seq_text(seq: int) -> str:
    """Zero-padded sequence: lexical order equals numeric order."""
    return f"{seq:0{SEQ_DIGITS}d}"


def session_pk(session_id: str) -> str:
    """Partition key of every item of `session_id`."""
    return f"SESSION#{session_id}"


def value_sk(namespace: str, key: str) -> str:
    """Sort key of a session value."""
    return f"{VALUE_PREFIX}{escape(namespace)}#{escape(key)}"


def value_scan_prefix(namespace: str, key_prefix: str) -> str:
    """Sort-key prefix of the session values of `namespace` whose key starts with `key_prefix`."""
    return f"{VALUE_PREFIX}{escape(namespace)}#{escape(key_prefix)}"


def list_prefix(namespace: str, key: str) -> str:
    """Sort-key prefix of every element of one session list."""
    return f"{LIST_PREFIX}{escape(namespace)}#{escape(key)}#"


def list_element_sk(namespace: str, key: str, seq: int) -> str:
    """Sort key of one session list element."""
    return list_prefix(namespace, key) + seq_text(seq)


def list_tombstone_sk(namespace: str, key: str) -> str:
    """Sort key of the tombstone recording the latest delete_list of one session list."""
    return f"{LIST_TOMBSTONE_PREFIX}{escape(namespace)}#{escape(key)}"


def entry_sk(seq: int) -> str:
    """Sort key of an entry (entries sort by sequence)."""
    return ENTRY_PREFIX + seq_text(seq)


def entry_index_sk(entry_id: str) -> str:
    """Sort key of the id -> seq index item of an entry."""
    return ENTRY_INDEX_PREFIX + escape(entry_id)


def usage_sk(seq: int) -> str:
    """Sort key of a usage row."""
    return USAGE_PREFIX + seq_text(seq)


def retirement_sk(scope_id: str) -> str:
    """Sort key of the retirement boundary of an ephemeral scope."""
    return RETIREMENT_PREFIX + escape(scope_id)


def seq_from_key(key: str) -> int:
    """The trailing zero-padded sequence of a sort key or object name (`...{seq}[.json]`)."""
    stem = key.removesuffix(".json")
    return int(stem[-SEQ_DIGITS:])


class ObjectKeys:
    """S3 key layout of one repository (`prefix` may be empty)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix.strip("/")

    def session_prefix(self, session_id: str) -> str:
        """Prefix of every object of a session (trailing slash included)."""
        head = f"{self.prefix}/" if self.prefix else ""
        return f"{head}sessions/{session_id}/"

    def scope_prefix(self, session_id: str, scope_id: str) -> str:
        """Prefix of the transaction objects of one scope (trailing slash included)."""
        return f"{self.session_prefix(session_id)}scopes/{quote_scope_id(scope_id)}/"

    def transaction_key(self, session_id: str, scope_id: str, first_seq: int) -> str:
        """Object key of one scoped transaction, named by its first sequence."""
        return f"{self.scope_prefix(session_id, scope_id)}{seq_text(first_seq)}.json"
