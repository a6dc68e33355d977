"""`python -m turnkeep.api [--port 8787]`: the HTTP API on 127.0.0.1, local mode.

SQLite storage and envelopes under TURNKEEP_LOCAL_DIR (default ./.local), the in-process
orchestrator (LocalLauncher), the scripted model unless TURNKEEP_MODEL says otherwise, and dev
tokens (`Authorization: Bearer dev-<user>`). `--port 0` picks a free port; the first stdout line
is always `turnkeep api listening on http://127.0.0.1:<port>`.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from collections.abc import Sequence

from turnkeep.api.app import create_app
from turnkeep.api.auth import LocalDevAuthenticator
from turnkeep.api.launch import LaunchError, LocalLauncher
from turnkeep.api.settings import ApiSettings
from turnkeep.api.views import DELETE_MARKER
from turnkeep.harness import reconcile_envelope
from turnkeep.harness.deps import ToolFactory
from turnkeep.harness.state import validate_op_id
from turnkeep.runtime import Runtime, build_runtime
from turnkeep.settings import TurnkeepSettings
from turnkeep.storage import open_repository
from turnkeep.tools.isolation import ProcessPoolRunner

HOST = "127.0.0.1"
DEFAULT_PORT = 8787
logger = logging.getLogger("turnkeep.api")


def resume_unfinished(runtime: Runtime, launcher: LocalLauncher) -> list[str]:
    """Relaunch turns a previous local server left running (the local orchestrator died)."""
    repository = open_repository(runtime.storage_url)
    try:
        session_ids = repository.list_sessions()
    finally:
        repository.close()
    resumed = []
    for session_id in session_ids:
        try:
            envelope = runtime.envelopes.get(session_id)
        except ValueError:
            continue  # a storage-only session id the envelope store does not accept
        if envelope is None:
            continue
        # A turn that ended but whose envelope update was lost is repaired here, not relaunched.
        meta = reconcile_envelope(runtime.deps, envelope).meta
        op_id = meta.get("turnRunId")
        if meta.get("turnStatus") not in ("running", "cancelling") or not isinstance(op_id, str):
            continue
        if op_id == DELETE_MARKER:
            continue
        try:
            validate_op_id(op_id)
        except ValueError:
            continue
        try:
            launcher.launch(session_id, op_id)
        except LaunchError as exc:
            # Still `running` in the envelope: the next start-up tries again.
            logger.warning("turn %s of %s not resumed: %s", op_id, session_id, exc)
            continue
        resumed.append(f"{session_id}/{op_id}")
    return resumed


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `python -m turnkeep.api`."""
    parser = argparse.ArgumentParser(prog="python -m turnkeep.api", description=__doc__)
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = free)"
    )
    parser.add_argument("--log-level", default="info", help="uvicorn log level")
    return parser


def main(argv: Sequence[str] | None = None, *, extra_tools: ToolFactory | None = None) -> int:
    """Serve the API until interrupted.

    `extra_tools(session_id, user_id)`: tools offered besides the built-ins (an embedding hook;
    they run in the tool worker processes unless declared `isolation="in_process"`).
    """
    import uvicorn

    args = build_parser().parse_args(argv)
    if not 0 <= args.port <= 65535:
        print(f"--port must be 0-65535, got {args.port}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = TurnkeepSettings()
    api_settings = ApiSettings()
    runtime = build_runtime(settings)
    # Tool calls run in killable worker processes: one CPU-bound or hung tool never stalls the
    # other sessions of this server (the GIL is shared by every thread of a process).
    tool_runner = ProcessPoolRunner(
        workers=api_settings.tool_workers, timeout_seconds=api_settings.tool_timeout_seconds
    )
    runtime.deps.tool_runner = tool_runner
    if extra_tools is not None:
        base, more = runtime.deps.tools, extra_tools
        runtime.deps.tools = lambda sid, uid: [*base(sid, uid), *more(sid, uid)]
    launcher = LocalLauncher(
        runtime.deps, workers=api_settings.local_workers, max_pending=api_settings.local_max_pending
    )
    try:
        app = create_app(runtime, launcher, LocalDevAuthenticator(), settings=api_settings)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, args.port))
        sock.listen(128)  # connections queue until uvicorn accepts them
        port = sock.getsockname()[1]
        resumed = resume_unfinished(runtime, launcher)
        if resumed:
            logger.info("resumed %d unfinished turn(s): %s", len(resumed), ", ".join(resumed))
        print(f"turnkeep api listening on http://{HOST}:{port}", flush=True)
        print(
            f"storage {runtime.storage_url}; model {settings.model}; "
            "auth: 'Authorization: Bearer dev-<user>'",
            flush=True,
        )
        server = uvicorn.Server(uvicorn.Config(app, log_level=args.log_level, lifespan="off"))
        server.run(sockets=[sock])
    finally:
        launcher.shutdown(wait=True)
        tool_runner.close()
        runtime.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
