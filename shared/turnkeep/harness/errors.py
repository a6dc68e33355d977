"""Errors of the harness runtime; each names the session/operation it concerns."""

from __future__ import annotations


class HarnessError(Exception):
    """Base of the harness's own errors."""


class StepInputError(HarnessError, ValueError):
    """A step input is malformed or names a round/call the operation does not have."""


class OperationNotFoundError(HarnessError, LookupError):
    """No operation (running or finished) with that id exists in the session."""


class SessionNotFoundError(HarnessError, LookupError):
    """The session has no envelope; create the session before starting a turn."""


class TurnConflictError(HarnessError):
    """Another turn is running in the session (the API maps this to 409)."""

    def __init__(self, session_id: str, running_op: str | None, status: str | None) -> None:
        super().__init__(
            f"session {session_id!r} already has a turn in progress "
            f"(operation {running_op!r}, status {status!r})"
        )
        self.session_id = session_id
        self.running_op = running_op
        self.status = status


class FencedWriteError(HarnessError):
    """A progress write arrived after its operation ended; it was rejected, nothing written."""


class CallLeaseExpiredError(HarnessError):
    """A tool call's claiming delivery stopped before its result; a retry takes it over."""
