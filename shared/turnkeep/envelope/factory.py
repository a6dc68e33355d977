"""`open_envelope_store(url)`: pick an envelope backend from a URL.

memory://[name]                             in-process, shared by name within the process
sqlite:///abs/file.db                       one file holds every session's envelope
aws://?table=T[&region=R][&endpoint=URL]    the DynamoDB session table (template.yaml)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from turnkeep.envelope.base import EnvelopeStore
from turnkeep.envelope.errors import MetaValidationError


def _query(url: str, query: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for name, values in parse_qs(query, keep_blank_values=True).items():
        if len(values) != 1:
            raise MetaValidationError(f"envelope URL {url!r} repeats parameter {name!r}")
        params[name] = values[0]
    return params


@dataclass(frozen=True, slots=True)
class DynamoTable:
    """Where an `aws://` envelope URL's table is: its name, region and endpoint ('' = the
    boto3 defaults)."""

    table: str
    region: str = ""
    endpoint: str = ""

    def client(self) -> Any:
        """The process's shared DynamoDB client for this table's region and endpoint."""
        from turnkeep.plumbing.clients import shared_client

        return shared_client("dynamodb", self.region, self.endpoint)


def dynamo_table_of(url: str) -> DynamoTable:
    """The table of an `aws://?table=T[&region=R][&endpoint=URL]` envelope URL: the one parser
    of that form (the envelope store and the WebSocket pusher read it); MetaValidationError."""
    parts = urlsplit(url)
    if parts.scheme != "aws":
        raise MetaValidationError(f"envelope URL {url!r} is not of the form aws://?table=<table>")
    params = _query(url, parts.query)
    unknown = sorted(params.keys() - {"table", "region", "endpoint"})
    if unknown:
        raise MetaValidationError(f"envelope URL {url!r} has unknown parameters {unknown}")
    table = params.get("table", "")
    if not table:
        raise MetaValidationError(f"envelope URL {url!r} needs ?table=<DynamoDB table>")
    return DynamoTable(table, params.get("region", ""), params.get("endpoint", ""))


def open_envelope_store(url: str) -> EnvelopeStore:
    """Open the envelope store at `url`; the caller closes it."""
    if not isinstance(url, str):
        raise MetaValidationError(f"envelope URL must be a string, got {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme == "memory":
        from turnkeep.envelope.memory import MemoryEnvelopeStore, memory_envelope_state

        return MemoryEnvelopeStore(memory_envelope_state(parts.netloc))
    if parts.scheme == "sqlite":
        from turnkeep.envelope.sqlite import SqliteEnvelopeStore

        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise MetaValidationError(
                f"envelope URL {url!r} must look like sqlite:///absolute/path.db"
            )
        return SqliteEnvelopeStore(parts.path)
    if parts.scheme == "aws":
        where = dynamo_table_of(url)
        from turnkeep.envelope.dynamodb import DynamoEnvelopeStore

        return DynamoEnvelopeStore(where.client(), where.table)
    raise MetaValidationError(
        f"envelope URL {url!r} has unknown scheme {parts.scheme!r}; "
        "use memory://, sqlite:/// or aws://?table="
    )
