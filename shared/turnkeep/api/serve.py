"""`turnkeep serve`: the HTTP API on one host and port, local mode (docs/api.md).

SQLite storage and envelopes under TURNKEEP_LOCAL_DIR (default ./.local) unless --storage /
--envelope say otherwise, the in-process orchestrator (LocalLauncher), the model of --model or
TURNKEEP_MODEL (checked before anything starts), and dev tokens (`Bearer dev-<user>`). The first
stdout line is always `turnkeep api listening on http://<host>:<port>` (`--port 0` = a free
port). At start-up, turns left running by a process that is gone are resumed; a turn a live
process drives (a `turnkeep chat` on the same file) is left alone
(`turnkeep.harness.local_owner`).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from turnkeep.api.app import create_app
from turnkeep.api.auth import LocalDevAuthenticator
from turnkeep.api.hub import LiveHub
from turnkeep.api.launch import LaunchError, LocalLauncher
from turnkeep.api.settings import ApiSettings
from turnkeep.envelope import turn_run_id, turn_status
from turnkeep.harness.deps import ToolFactory
from turnkeep.harness.local_owner import inspect_turn, settle_ended
from turnkeep.runtime.build import Runtime, open_local_runtime
from turnkeep.runtime.config_errors import ConfigError, check_model_spec, config_line, load_settings
from turnkeep.runtime.settings import local_settings
from turnkeep.storage import open_repository
from turnkeep.tools.isolation import ProcessPoolRunner

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
logger = logging.getLogger("turnkeep.api")


def _quiet_server(config: Any) -> Any:
    """A uvicorn server that ends on SIGINT/SIGTERM by returning, not by re-raising the signal.

    uvicorn raises a captured signal again once it has shut down, which kills the process
    before `serve` closes the tool worker pool and the stores (the resource tracker then warns
    of leaked semaphores). Here the signal is kept in `captured` for the exit status instead.
    """
    import uvicorn

    class QuietServer(uvicorn.Server):
        captured: list[int]

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                try:
                    yield
                finally:
                    self.captured = list(self._captured_signals)
                    self._captured_signals.clear()

    server = QuietServer(config)
    server.captured = []
    return server


class PortBusyError(Exception):
    """The address is taken; `str()` is the one line to show."""


@dataclass(frozen=True)
class ServeOptions:
    """What `turnkeep serve` was asked for (None = the environment's or the default)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    storage: str | None = None
    envelope: str | None = None
    model: str | None = None
    log_level: str = "info"
    agent: str | None = None


def resume_unfinished(runtime: Runtime, launcher: LocalLauncher) -> list[str]:
    """Resume turns whose local owner is gone; repair ended ones; leave driven ones alone."""
    repository = open_repository(runtime.storage_url)
    try:
        session_ids = set(repository.list_sessions())
    finally:
        repository.close()
    # A turn claimed in the envelope whose start died before its first storage commit has no
    # storage trace (SQLite lists only sessions that committed): scan the envelopes too.
    session_ids.update(runtime.envelopes.local_session_ids() or ())
    resumed = []
    for session_id in sorted(session_ids):
        if _is_child(runtime, session_id):
            continue  # a sub-agent's child turn: its parent's launch drives it (docs/agent.md)
        if _relaunch_waiting(runtime, launcher, session_id):
            resumed.append(session_id)
            continue
        try:
            finding = inspect_turn(runtime.deps, session_id)
        except ValueError:
            continue  # a storage-only session id the envelope store does not accept
        if finding is None:
            continue
        if finding.verdict == "ended":
            settle_ended(runtime.deps, finding)
            continue
        if finding.verdict != "orphaned":
            logger.info("%s of %s: left alone", finding.describe(), session_id)
            continue
        try:
            launcher.launch(session_id, finding.op_id)
        except LaunchError as exc:
            # Still `running` in the envelope: the next start-up tries again.
            logger.warning("turn %s of %s not resumed: %s", finding.op_id, session_id, exc)
            continue
        resumed.append(f"{session_id}/{finding.op_id}")
    return resumed


def _is_child(runtime: Runtime, session_id: str) -> bool:
    """Whether `session_id` is a sub-agent call's child session (its envelope says so)."""
    try:
        envelope = runtime.deps.envelopes.get(session_id)
    except ValueError:
        return False
    return envelope is not None and envelope.parent_session_id is not None


def _relaunch_waiting(runtime: Runtime, launcher: LocalLauncher, session_id: str) -> bool:
    """Launch a turn that waits for a person again: it pauses at once (no thread held) with its
    timeout re-armed, or applies a decision recorded before the restart (docs/approvals.md)."""
    try:
        envelope = runtime.deps.envelopes.get(session_id)
    except ValueError:
        return False
    meta = envelope.meta if envelope is not None else {}
    op_id = turn_run_id(meta)
    if turn_status(meta) != "awaiting_approval" or not isinstance(op_id, str):
        return False
    try:
        launcher.launch(session_id, op_id)
    except LaunchError as exc:
        logger.warning("turn %s of %s (awaiting approval) not re-armed: %s", op_id, session_id, exc)
        return False
    return True


def check_port(port: int) -> int:
    """`port` if 0-65535; ConfigError naming --port otherwise."""
    if not 0 <= port <= 65535:
        raise ConfigError(config_line("--port", port, "a port number 0-65535 (0 = a free port)"))
    return port


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port; PortBusyError when it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortBusyError(
                f"port {port} on {host} is already in use (another `turnkeep serve`?); "
                "stop it or pick another with --port"
            ) from None
        raise ConfigError(
            config_line("--host", host, f"an address of this machine ({exc})")
        ) from None
    sock.listen(128)  # connections queue until uvicorn accepts them
    return sock


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def serve(
    options: ServeOptions,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    *,
    extra_tools: ToolFactory | None = None,
) -> int:
    """Serve the API until interrupted. ConfigError / PortBusyError before anything starts.

    `extra_tools(session_id, user_id)`: tools offered besides the built-ins (an embedding hook;
    they run in the tool worker processes unless declared `isolation="in_process"`).
    """
    import uvicorn

    check_port(options.port)
    settings = local_settings(
        storage=options.storage, envelope=options.envelope, model=options.model, agent=options.agent
    )
    api_settings = load_settings(ApiSettings)
    for spec in api_settings.allowed_models:
        check_model_spec(spec, "TURNKEEP_ALLOWED_MODELS")
    if not _loopback(options.host):
        err.write(
            f"turnkeep serve: warning: listening on {options.host}; dev tokens "
            "(`Bearer dev-<user>`) are not authentication, anyone who can reach it is any user\n"
        )
    sock = bind(options.host, options.port)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    runtime = open_local_runtime(
        settings,
        storage_source="--storage" if options.storage is not None else "TURNKEEP_STORAGE_URL",
        envelope_source="--envelope" if options.envelope is not None else "TURNKEEP_ENVELOPE_URL",
    )
    # Tool calls run in killable worker processes: one CPU-bound or hung tool never stalls the
    # other sessions of this server (the GIL is shared by every thread of a process).
    tool_runner = ProcessPoolRunner(
        workers=api_settings.tool_workers, timeout_seconds=api_settings.tool_timeout_seconds
    )
    runtime.deps.tool_runner = tool_runner
    # The turns run in this process: their live text and commits reach the event streams.
    runtime.deps.live = LiveHub()
    if extra_tools is not None:
        base, more = runtime.deps.agent.tools, extra_tools
        runtime.deps.tools = lambda sid, uid: [*base, *more(sid, uid)]
    launcher = LocalLauncher(
        runtime.deps, workers=api_settings.local_workers, max_pending=api_settings.local_max_pending
    )
    try:
        app = create_app(
            runtime, launcher, LocalDevAuthenticator(), settings=api_settings, console=True
        )
        port = sock.getsockname()[1]
        resumed = resume_unfinished(runtime, launcher)
        if resumed:
            logger.info("resumed %d unfinished turn(s): %s", len(resumed), ", ".join(resumed))
        shown_host = f"[{options.host}]" if ":" in options.host else options.host
        out.write(f"turnkeep api listening on http://{shown_host}:{port}\n")
        out.write(
            f"storage {runtime.storage_url}; agent {runtime.deps.agent.name}; "
            f"model {runtime.settings.model}; "
            "auth: 'Authorization: Bearer dev-<user>'\n"
        )
        out.write(f"console: http://{shown_host}:{port}/\n")
        out.flush()
        server = _quiet_server(uvicorn.Config(app, log_level=options.log_level, lifespan="off"))
        server.run(sockets=[sock])
    finally:
        sock.close()
        launcher.shutdown(wait=True)
        tool_runner.close()
        runtime.close()
    # Ended by a signal: the shell's status for it (128 + its number), after a clean shutdown.
    return 128 + server.captured[-1] if server.captured else 0
