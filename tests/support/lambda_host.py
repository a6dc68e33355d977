"""Run our Lambda handlers inside moto: moto's Docker-free Lambda backend is patched to call the
handler function of the invoked function name, so a Step Functions execution that moto runs
invokes the real handler code in this process (Lambda's error contract included)."""

from __future__ import annotations

import contextvars
import gc
import importlib.util
import io
import json
import threading
import traceback
import uuid
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from moto.awslambda_simple.models import LambdaSimpleBackend

ROOT = Path(__file__).resolve().parents[2]

LambdaHandler = Callable[[dict[str, Any], Any], Any]


def load_function_module(folder: str) -> ModuleType:
    """Import `functions/<folder>/app.py` as a fresh module (not a package: as Lambda does)."""
    path = ROOT / "functions" / folder / "app.py"
    spec = importlib.util.spec_from_file_location(f"lambda_{folder}_{uuid.uuid4().hex}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        # The handler pauses the collector for its imports and freezes what exists then (a
        # container's imports live as long as it does); here that is the whole test process,
        # whose objects must stay collectable, import error or not.
        gc.unfreeze()
        gc.enable()
    return module


@dataclass
class FakeContext:
    """The parts of the Lambda context object Powertools reads."""

    function_name: str
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    invoked_function_arn: str = ""
    log_group_name: str = "/aws/lambda/test"
    log_stream_name: str = "test"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass
class LambdaHost:
    """Function name → handler; records every invocation (name, payload, error type)."""

    handlers: dict[str, LambdaHandler] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)
    _running: contextvars.ContextVar[str | None] = field(
        default_factory=lambda: contextvars.ContextVar("lambda_host_function", default=None)
    )
    # One invocation at a time, as in a Lambda container: Powertools keeps one metric set per
    # process, and two handlers flushing it at once (moto's execution thread and a test calling
    # the API handler) race between its emptiness check and its serialization.
    _invocation: threading.RLock = field(default_factory=threading.RLock)
    containers: bool = False
    """Each function in containers of its own: handlers of different functions run at once, as
    deployed (a subscribe while the model step streams). Only with Powertools metrics off
    (POWERTOOLS_METRICS_DISABLED), for the reason above."""
    _locks: dict[str, threading.RLock] = field(default_factory=dict)

    def current_function(self) -> str | None:
        """The function whose handler runs in this context (None outside a handler)."""
        return self._running.get()

    @contextmanager
    def acting_as(self, name: str) -> Iterator[None]:
        """Run the block as function `name` (a handler called directly by a test), one handler
        at a time; the name follows the context into the threads that copy it (e.g. FastAPI's
        sync routes)."""
        lock = self._invocation
        if self.containers:
            with self._invocation:
                lock = self._locks.setdefault(name, threading.RLock())
        with lock:
            token = self._running.set(name)
            try:
                yield
            finally:
                self._running.reset(token)

    def invoke(self, function_name: str, body: Any, response_headers: dict[str, str]) -> bytes:
        name = (
            function_name.rsplit(":", 1)[-1] if function_name.startswith("arn:") else function_name
        )
        handler = self.handlers[name]
        event = json.loads(body) if body else {}
        try:
            with self.acting_as(name):
                result = handler(event, FakeContext(function_name=name))
        except Exception as exc:  # Lambda turns any handler exception into a function error
            self.calls.append((name, event, type(exc).__name__))
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps(
                {
                    "errorType": type(exc).__name__,
                    "errorMessage": str(exc),
                    "stackTrace": traceback.format_exception(exc)[-3:],
                }
            ).encode()
        self.calls.append((name, event, None))
        return json.dumps(result).encode()


@contextmanager
def hosted_lambdas(host: LambdaHost) -> Iterator[LambdaHost]:
    """Patch moto's simple Lambda backend so invocations run `host`'s handlers."""
    original = LambdaSimpleBackend.invoke

    def invoke(  # noqa: PLR0917 - moto's signature
        self: LambdaSimpleBackend,
        function_name: str,
        qualifier: str | None,
        body: Any,
        headers: Any,
        response_headers: Any,
    ) -> bytes:
        payload = host.invoke(function_name, body, response_headers)
        response_headers["Content-Length"] = str(len(payload))
        return payload

    LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]
    try:
        yield host
    finally:
        LambdaSimpleBackend.invoke = original  # type: ignore[method-assign]


def dummy_zip() -> bytes:
    """A deployment package moto accepts (the code in it is never run)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return event\n")
    return buffer.getvalue()
