"""Where tool handlers run: in the calling thread, or in worker processes that can be killed.

A CPU-bound handler (big-integer arithmetic holds the GIL for as long as it runs) or a hung one
stalls every thread of its process, and a thread cannot be stopped. In a long-lived server
(`python -m turnkeep.api`) tools therefore run in a `ProcessPoolRunner`: a pebble process pool
whose call past `timeout_seconds` ends with a tool error while its worker is killed and
replaced. Lambda already isolates each tool step in its own invocation (and bounds it by the
function timeout), so the harness default is `InProcessRunner`.

A tool declared `isolation="in_process"` always runs in the calling thread: the working-notes
tools, which need the session's envelope store and are bounded by design (one envelope read and
write of a capped text), and the O(1) built-ins `clock_now` and `echo`.
"""

from __future__ import annotations

import logging
import pickle  # nosec B403  # only dumps our own payload to test it can cross; never loads
import threading
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from turnkeep.tools.base import Tool, ToolContext, ToolResult
from turnkeep.tools.context import UnsentDeps
from turnkeep.tools.state import ToolState

if TYPE_CHECKING:
    from pebble import ProcessPool

logger = logging.getLogger("turnkeep.tools")

_PORTABLE = (str, int, float, bool, type(None))


class ToolRunner(Protocol):
    """Runs one validated tool call; exceptions of the handler propagate to the registry."""

    def run(self, tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> ToolResult:
        """The handler's result (or a tool error result when the call was stopped)."""
        ...


def run_in_process(tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> ToolResult:
    """Run the handler in this process, within the tool's `timeout_seconds` if it has one.

    An `async def` function tool cancels itself at its limit. A synchronous handler cannot be
    stopped from outside: it runs in a thread of its own, and past its limit the call ends
    with a tool error while that thread is left to finish (its result is dropped).
    """
    timeout = tool.timeout_seconds
    if timeout is None or getattr(tool, "bounds_itself", False):
        return tool.run(args, ctx)
    outcome: list[ToolResult | BaseException] = []

    def call() -> None:
        try:
            outcome.append(tool.run(args, ctx))
        except BaseException as exc:  # re-raised in the caller's thread below
            outcome.append(exc)

    worker = threading.Thread(target=call, name=f"tool-{tool.name}", daemon=True)
    worker.start()
    worker.join(timeout)
    if not outcome:
        ctx.state.seal(discard=True)  # the abandoned thread's writes are not the call's
        logger.warning(
            "tool %s passed its %.1f s limit in-process; left running", tool.name, timeout
        )
        return ToolResult(
            f"Error: tool {tool.name} did not finish within its limit of {timeout:g} s; the "
            "call was abandoned (its result, if any, is dropped).",
            True,
        )
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


class InProcessRunner:
    """Runs the handler in this process (Lambda, tests, the in-process CLI), within the tool's
    `timeout_seconds` (`run_in_process`)."""

    def run(self, tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Call the handler here."""
        return run_in_process(tool, args, ctx)

    def close(self) -> None:
        """Nothing to release."""


WorkerOutcome = tuple[ToolResult, tuple[dict[str, Any], frozenset[str]]]


def _call_in_worker(tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> WorkerOutcome:
    """What a worker process runs (module level, so the pool can pickle it by name): the
    result and the call's state writes, which the parent commits with it."""
    result = tool.run(args, ctx)
    return result, ctx.state.changes()


def _portable(tool: Tool[Any], ctx: ToolContext) -> ToolContext:
    # Extras holding live objects (the storage-backed `progress`) cannot cross a process
    # boundary; plain values (e.g. `replayed`) do. State (as its values) and deps go only to a
    # tool that sees them: an unpicklable deps object must not stop every other tool.
    extras = {k: v for k, v in ctx.extras.items() if isinstance(v, _PORTABLE)}
    if not tool.uses_context:
        return ToolContext(ctx.session_id, ctx.user_id, ctx.operation_id, ctx.call_id, extras)
    deps: Any = ctx.deps_source
    try:
        pickle.dumps(deps)
    except Exception as exc:
        deps = UnsentDeps(
            f"the agent's deps ({type(deps).__name__}) cannot be pickled to reach the worker "
            f"process running tool {tool.name} ({type(exc).__name__}); give Agent(deps=...) "
            "a module-level factory function instead (each process calls it once)"
        )
    return ToolContext(
        ctx.session_id,
        ctx.user_id,
        ctx.operation_id,
        ctx.call_id,
        extras,
        state=ToolState(ctx.state.snapshot()),
        deps_source=deps,
    )


def _pool_context() -> Any:
    # forkserver: workers are forked from a small clean server process, never from this
    # multithreaded one (a fork of a threaded process can inherit a held lock). Imported here:
    # the Lambda layer imports this module and never starts a pool.
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


class ProcessPoolRunner:
    """Runs `isolation="process"` tools in a pool of `workers` processes, each call within its
    tool's `timeout_seconds`, else this runner's `timeout_seconds`.

    A call past its limit ends with a tool error text; pebble kills its worker and starts a new
    one, so the pool keeps its size. A worker that dies (e.g. killed by the OS) is replaced the
    same way. Calls beyond `workers` wait for a free worker (their limit counts from their start).
    """

    def __init__(self, *, workers: int = 2, timeout_seconds: float = 30.0) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be > 0")
        from pebble import ProcessPool  # only the local server needs it (not the Lambda layer)

        self.workers = workers
        self.timeout_seconds = timeout_seconds
        self._pool: ProcessPool = ProcessPool(max_workers=workers, context=_pool_context())
        self._lock = threading.Lock()
        self._closed = False

    def run(self, tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Run `tool` in a worker process (or in this thread if it is declared in-process)."""
        if tool.isolation == "in_process":
            return run_in_process(tool, args, ctx)
        timeout = tool.timeout_seconds or self.timeout_seconds
        payload = (tool, args, _portable(tool, ctx))
        try:
            pickle.dumps(payload)  # fail here, with a clear message, not in the pool's feeder
        except Exception as exc:
            return ToolResult(
                f"Error: tool {tool.name} cannot run in a worker process: its handler or "
                f"arguments cannot be pickled ({type(exc).__name__}). Define the handler at "
                "module level, or declare the tool isolation='in_process' if it is bounded "
                "by design.",
                True,
            )
        with self._lock:
            if self._closed:
                return ToolResult(
                    f"Error: tool {tool.name} was not run: the server is stopping", True
                )
            future = self._pool.schedule(_call_in_worker, args=payload, timeout=timeout)
        return self._outcome(tool.name, future, timeout, ctx)

    def _outcome(self, name: str, future: Any, timeout: float, ctx: ToolContext) -> ToolResult:
        from pebble import ProcessExpired

        try:
            outcome: WorkerOutcome = future.result()
        except FutureTimeoutError:
            logger.warning("tool %s passed its %.1f s limit; worker killed", name, timeout)
            return ToolResult(
                f"Error: tool {name} did not finish within its limit of "
                f"{timeout:g} s and was stopped (its worker process was killed "
                "and replaced). Try a smaller input.",
                True,
            )
        except ProcessExpired as exc:
            return ToolResult(
                f"Error: tool {name} ended its worker process (exit code {exc.exitcode}) "
                "before returning; the worker was replaced.",
                True,
            )
        result, (written, deleted) = outcome
        if not isinstance(result, ToolResult):
            return ToolResult(
                f"Error: tool {name} returned {type(result).__name__}, not a ToolResult", True
            )
        ctx.state.absorb(written, deleted)
        return result

    def close(self) -> None:
        """Stop the workers (running calls are killed; later calls get a tool error)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.stop()  # type: ignore[no-untyped-call]  # pebble leaves stop() unannotated
        self._pool.join()
