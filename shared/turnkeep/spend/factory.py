"""`open_ledger(url)`: the spend ledger beside the envelope store, chosen by the same URL.

memory://[name]                             in-process, shared by name within the process
sqlite:///abs/file.db                       the ledger's tables in that file
aws://?table=T[&region=R][&endpoint=URL]    items in the DynamoDB session table
"""

from __future__ import annotations

from urllib.parse import urlsplit

from turnkeep.spend.ledger import SpendLedger, memory_ledger


def open_ledger(url: str) -> SpendLedger:
    """Open the ledger at `url` (an envelope store URL); ValueError naming what does not fit."""
    parts = urlsplit(url)
    if parts.scheme == "memory":
        return memory_ledger(parts.netloc)
    if parts.scheme == "sqlite":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ValueError(f"ledger URL {url!r} must look like sqlite:///absolute/path.db")
        from turnkeep.spend.ledger_sqlite import SqliteLedger

        return SqliteLedger(parts.path)
    if parts.scheme == "aws":
        from turnkeep.envelope.factory import dynamo_table_of
        from turnkeep.spend.ledger_dynamodb import DynamoLedger

        where = dynamo_table_of(url)  # the one parser of the envelope URL
        return DynamoLedger(where.client(), where.table)
    raise ValueError(
        f"ledger URL {url!r} has unknown scheme {parts.scheme!r}; "
        "use memory://, sqlite:/// or aws://?table="
    )
