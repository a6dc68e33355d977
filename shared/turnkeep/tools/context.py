"""`ToolContext`: what a tool call knows about where it runs — the session, user, turn and call
ids, the agent's `deps` and the session's durable `state` (docs/agent.md, "Tool context")."""

from __future__ import annotations

import functools
import inspect
import threading
from dataclasses import dataclass, field
from typing import Any

from turnkeep.tools.state import ToolState

_RESOLVED: dict[Any, Any] = {}
_RESOLVING = threading.Lock()


def is_deps_factory(source: object) -> bool:
    """Whether `Agent(deps=source)` names a factory (a function, class, bound method or
    `functools.partial`) rather than the dependencies object itself."""
    return (
        inspect.isfunction(source)
        or inspect.ismethod(source)
        or inspect.isclass(source)
        or isinstance(source, functools.partial)
    )


class DepsUnavailableError(RuntimeError):
    """`ToolContext.deps` read where the agent's deps could not be sent (one line why)."""


@dataclass(frozen=True, slots=True)
class UnsentDeps:
    """Stands for deps that could not reach this process (not picklable); reading
    `ToolContext.deps` raises `DepsUnavailableError` with `reason`, other tools are unaffected."""

    reason: str


def resolve_deps(source: object) -> Any:
    """The dependencies of `source`: the object itself, or its factory's value, called once
    per process (a worker process calls it again, once)."""
    if isinstance(source, UnsentDeps):
        raise DepsUnavailableError(source.reason)
    if not is_deps_factory(source):
        return source
    try:
        return _RESOLVED[source]
    except KeyError:
        pass
    with _RESOLVING:  # two threads' first calls still make one factory call
        if source not in _RESOLVED:
            _RESOLVED[source] = source()  # type: ignore[operator]  # a factory, checked above
        return _RESOLVED[source]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where a tool call runs: `session_id`, `user_id`, `turn_id` (= `operation_id`),
    `call_id`, the agent's `deps` and the session's durable key-value `state`.

    Tools bound to a session (the working-notes tools) get it by construction, not from here.
    """

    session_id: str
    user_id: str
    operation_id: str
    call_id: str
    extras: dict[str, Any] = field(default_factory=dict)
    state: ToolState = field(default_factory=ToolState)
    """The session's tool state as this call sees it (its writes commit with its result)."""
    deps_source: Any = None
    """`Agent(deps=...)` as given: an object, or a factory `deps` calls once per process."""

    @property
    def turn_id(self) -> str:
        """The turn's id (the API's turn id; the harness calls it the operation id)."""
        return self.operation_id

    @property
    def deps(self) -> Any:
        """The agent's dependencies (`Agent(deps=...)`; a factory's value), None without."""
        return resolve_deps(self.deps_source)
