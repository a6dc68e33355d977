"""Per-container state of the Lambda handlers: the runtime, built once, on first use."""

from __future__ import annotations

import os
import threading

from turnkeep.agent.definition import Agent
from turnkeep.runtime.agent_loading import AGENT_ENV, load_agent
from turnkeep.runtime.build import Runtime, build_runtime
from turnkeep.runtime.settings import TurnkeepSettings

_LOCK = threading.Lock()
_RUNTIME: Runtime | None = None


def runtime() -> Runtime:
    """The container's runtime, built from the environment on first use (not at import, so a
    cold start pays only for what the first invocation needs)."""
    global _RUNTIME  # noqa: PLW0603 - one runtime per Lambda container, by design
    with _LOCK:
        if _RUNTIME is None:
            settings = TurnkeepSettings()
            _RUNTIME = build_runtime(settings)
            # Tokens and cost per model as CloudWatch metrics (EMF in the function's log).
            from turnkeep.aws_lambda.spend_metrics import publish_charge

            _RUNTIME.deps.on_charge = publish_charge
            if settings.ws_endpoint:
                # The steps push each new event to the turn's WebSocket subscribers.
                from turnkeep.live.push import websocket_pusher

                pusher = websocket_pusher(
                    settings.ws_endpoint,
                    settings.envelope_url_or_local(),
                    delta_gap_s=settings.limits.live_interval_ms / 1000,
                )
                if _RUNTIME.deps.agent.agents:
                    # A child turn's steps push to its parents' watchers too (nested).
                    from turnkeep.live.nesting import parent_finder

                    pusher.parents = parent_finder(_RUNTIME.deps)
                _RUNTIME.deps.live = pusher
        return _RUNTIME


def load_container_agent() -> Agent:
    """The agent TURNKEEP_AGENT names, loaded now: the handlers call this at import, so a bad
    reference fails the container's init with its one line in the log (before any turn)."""
    return load_agent(os.environ.get(AGENT_ENV, ""))


def reset_runtime() -> None:
    """Drop the cached runtime (tests, or after the environment changed)."""
    global _RUNTIME  # noqa: PLW0603
    with _LOCK:
        if _RUNTIME is not None:
            _RUNTIME.close()
        _RUNTIME = None


def install_runtime(runtime: Runtime | None) -> Runtime | None:
    """Make `runtime` the container's runtime (None: build from the environment on next use);
    returns the one it replaces, unclosed. For tests that run the handlers on prepared deps."""
    global _RUNTIME
    with _LOCK:
        previous, _RUNTIME = _RUNTIME, runtime
        return previous
