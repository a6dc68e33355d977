"""Errors raised by session storage; every one names what was wrong."""

from __future__ import annotations


class StorageError(Exception):
    """Base of every error the storage raises on bad input or bad state."""


class StorageValidationError(StorageError, ValueError):
    """A call's arguments are invalid; nothing was written."""


class InvalidScopeError(StorageValidationError):
    """A scope id is empty, malformed Unicode or too long once encoded."""


class TransactionScopeError(StorageValidationError):
    """A transaction mixes scopes or holds a write its scope does not allow."""


class EntryConflictError(StorageValidationError):
    """An entry id is duplicated or its parent does not exist."""


class GuardFailedError(StorageError):
    """A guarded commit found its guard value absent; nothing was written."""


class StorageClosedError(StorageError):
    """The storage handle was closed; reads and writes are rejected."""


class StorageCorruptionError(StorageError):
    """Persisted state is malformed; the storage refuses to open it."""


class StorageConflictError(StorageError):
    """A concurrent writer won repeatedly; the commit was not applied."""


class StorageUnavailableError(StorageError):
    """The backing store could not be reached; the commit was not applied."""


class AttachedConditionError(StorageError):
    """A commit's attached item (another store's, e.g. the envelope) failed its condition;
    nothing was written. `item` is that item as it was, when the backend returned it."""

    def __init__(self, message: str, item: object = None) -> None:
        super().__init__(message)
        self.item = item
