"""Errors raised by envelope stores; every one names what was wrong."""

from __future__ import annotations


class EnvelopeError(Exception):
    """Base of every error an envelope store raises."""


class MetaValidationError(EnvelopeError, ValueError):
    """A write names an unknown, foreign or malformed meta key or id; nothing was written.

    `code` says which (`unknown_meta_key`, `worker_key` / `host_key`: a key the other side
    owns, `invalid_meta`: a bad value, id or size) and `field` names the key, so callers such
    as the API map the error instead of checking again.
    """

    def __init__(self, message: str, *, code: str = "invalid_meta", field: str | None = None):
        super().__init__(message)
        self.code = code
        self.field = field


class EnvelopeNotFoundError(EnvelopeError):
    """No envelope exists for the session (or it belongs to another owner)."""


class EnvelopeExistsError(EnvelopeError):
    """`create` found an envelope already stored for the session."""


class EnvelopeConflictError(EnvelopeError):
    """A compare-and-set `expect` did not hold, or a concurrent writer won twice; not applied."""


class EnvelopeUnavailableError(EnvelopeError):
    """The backing store could not be reached or answered with an error; outcome unknown."""


class EnvelopeClosedError(EnvelopeError):
    """The store was closed; reads and writes are rejected."""
