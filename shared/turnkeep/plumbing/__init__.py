"""Plumbing several layers share, reading nothing else of turnkeep: the process's one client
cache (`clients`), DynamoDB batch calls (`dynamodb_batches`), credential references
(`credentials`) and SQLite's switch to WAL (`sqlite_wal`)."""
