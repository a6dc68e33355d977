"""What a `sam local start-lambda` answer means to Step Functions.

start-lambda does not answer like Lambda's Invoke API: a handler that raised comes back as HTTP
200 with no `x-amz-function-error` header (the body carries `errorType`/`errorMessage`), a
timeout as the bare text `Task timed out after N seconds`, and start-lambda's own failures as
4xx/5xx with `x-amzn-errortype`. `outcome()` turns an answer into what Step Functions would see,
so the definition's Retry and Catch behave as on AWS.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Keys of Lambda's error payload (python runtime): a result with only these is an error.
_ERROR_KEYS = frozenset({"errorType", "errorMessage", "stackTrace", "requestId", "cause"})
_TIMEOUT = re.compile(r"^\s*Task timed out after [0-9.]+ seconds\s*$")
# What Lambda reports as errorType for a function that ran past its timeout; Step Functions
# raises it under that name (the turn definition retries it once).
TIMEOUT_ERROR = "Sandbox.Timedout"


@dataclass(frozen=True, slots=True)
class TaskFailure:
    """A failed Lambda task: the Step Functions error name and its cause text."""

    error: str
    cause: str

    def payload(self) -> dict[str, str]:
        """Lambda's error payload for this failure (what a function error carries)."""
        try:
            message = json.loads(self.cause).get("errorMessage", self.cause)
        except (ValueError, AttributeError):
            message = self.cause
        return {"errorType": self.error, "errorMessage": str(message)}


@dataclass(frozen=True, slots=True)
class TaskResult:
    """A successful Lambda task and its result (any JSON value, or raw text)."""

    value: Any


def outcome(status: int, headers: Mapping[str, str], body: bytes) -> TaskResult | TaskFailure:
    """The Step Functions view of one start-lambda answer (`headers` matched case-blind)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    text = body.decode("utf-8", errors="replace")
    if status >= 400:
        return _service_failure(status, lowered.get("x-amzn-errortype", ""), text)
    if _TIMEOUT.match(text):
        return TaskFailure(
            TIMEOUT_ERROR, json.dumps({"errorType": TIMEOUT_ERROR, "errorMessage": text.strip()})
        )
    try:
        value = json.loads(text) if text.strip() else None
    except ValueError:
        value = text
    if "x-amz-function-error" in lowered:  # what Lambda itself sends (newer SAM CLIs may too)
        error = value.get("errorType") if isinstance(value, dict) else None
        return TaskFailure(str(error or "Lambda.Unknown"), text)
    if isinstance(value, dict) and _is_error_payload(value):
        return TaskFailure(str(value["errorType"]), text)
    return TaskResult(value)


def connection_failure(message: str) -> TaskFailure:
    """start-lambda could not be reached: what Step Functions reports when the SDK call to
    Lambda fails on the client side."""
    return TaskFailure("Lambda.SdkClientException", message)


def _is_error_payload(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("errorType"), str)
        and "errorMessage" in value
        and set(value) <= _ERROR_KEYS
    )


def _service_failure(status: int, error_type: str, text: str) -> TaskFailure:
    # x-amzn-errortype may carry a ":<doc url>" suffix.
    name = error_type.split(":", 1)[0].strip()
    if not name:
        if status == 429:
            name = "TooManyRequestsException"
        elif status >= 500:
            name = "ServiceException"
        else:
            name = "AWSLambdaException"
    try:
        parsed = json.loads(text)
        message = parsed.get("message") or parsed.get("Message") or text
    except (ValueError, AttributeError):
        message = text
    return TaskFailure(f"Lambda.{name}", str(message).strip() or f"HTTP {status}")
