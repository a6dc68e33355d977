"""The `turnkeep` command: serve the HTTP API, chat, run the demo, look at local sessions.

Local state lives in `sqlite:///<cwd>/.local/turnkeep.db` unless TURNKEEP_STORAGE_URL /
TURNKEEP_ENVELOPE_URL (or --storage / --envelope) say otherwise. A configuration error is one
line naming the variable or flag, the bad value and what is accepted; the exit status is 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TextIO

from turnkeep.cli import remote
from turnkeep.cli.chat import TOKEN_ENV, Terminated, run_local_chat, run_remote_chat
from turnkeep.cli.demo import DEMO_USER, run_demo
from turnkeep.cli.printer import StreamPrinter
from turnkeep.cli.token import add_token_parser, run_token
from turnkeep.cli.usage import add_usage_parser
from turnkeep.cli.ws import WS_URL_ENV, check_ws_url
from turnkeep.runtime.build import open_local_runtime
from turnkeep.runtime.config_errors import CONFIG_EXIT_STATUS, ConfigError
from turnkeep.runtime.settings import local_settings

__all__ = ["StreamPrinter", "build_parser", "main", "run_chat", "run_demo"]

DEFAULT_HOST = "127.0.0.1"  # = turnkeep.api.serve's (imported lazily: FastAPI is optional)
DEFAULT_PORT = 8787

_EPILOG = """\
commands:
  turnkeep serve      the HTTP API on 127.0.0.1:8787 (local SQLite, in-process orchestrator)
  turnkeep chat       chat in the terminal (in-process, or --url for an API)
  turnkeep demo       a scripted multi-turn conversation, checked as it runs
  turnkeep sessions   list / show / notes / delete local sessions
  turnkeep usage      tokens and cost by day and model (local, or --url for an API)
  turnkeep token      sign in to the stack's Cognito user pool and print a token
`turnkeep <command> --help` for each one's options."""


def run_chat(args: argparse.Namespace, inp: TextIO, out: TextIO) -> int:
    """`turnkeep chat`: over the API with --url, else in-process on the local store."""
    if args.url is not None:
        return run_remote_chat(args, inp, out, sys.stderr)
    settings = local_settings(model=args.model, agent=args.agent)
    runtime = open_local_runtime(settings)
    try:
        return run_local_chat(args, runtime, inp, out)
    finally:
        runtime.close()


def _run_usage(args: argparse.Namespace, out: TextIO) -> int:
    from turnkeep.cli.usage import local_usage, remote_usage

    user = args.user or DEMO_USER
    if args.url is not None:
        token = args.token or os.environ.get(TOKEN_ENV) or None
        with remote.open_client(args.url, token=token, user=user) as client:
            return remote_usage(client, args, out)
    runtime = open_local_runtime(local_settings())
    try:
        return local_usage(args, runtime, user, out)
    finally:
        runtime.close()


def _run_sessions(args: argparse.Namespace, out: TextIO) -> int:
    from turnkeep.cli.sessions import run_sessions

    runtime = open_local_runtime(local_settings())
    try:
        return run_sessions(args, runtime, out)
    finally:
        runtime.close()


def _serve(args: argparse.Namespace) -> int:
    """`turnkeep serve`; 1 with one line when the port is taken."""
    try:
        from turnkeep.api.serve import PortBusyError, ServeOptions, serve
    except ImportError as exc:  # pragma: no cover - depends on the installation
        sys.stderr.write(
            f"turnkeep serve: needs the api extra: pip install 'turnkeep[api]' ({exc})\n"
        )
        return 1
    options = ServeOptions(
        host=args.host,
        port=args.port,
        storage=args.storage,
        envelope=args.envelope,
        model=args.model,
        log_level=args.log_level,
        agent=args.agent,
    )
    try:
        return serve(options)
    except PortBusyError as exc:
        sys.stderr.write(f"turnkeep serve: {exc}\n")
        return 1


def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {value!r}")
    return seconds


def _non_negative_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {value!r}")
    return seconds


def _add_agent(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        metavar="MODULE:ATTR",
        help="the Agent to run, package.module:attribute (TURNKEEP_AGENT; default: the demo "
        "agent; docs/agent.md)",
    )


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve the HTTP API (local mode)",
        description="Serve the HTTP API: SQLite under TURNKEEP_LOCAL_DIR (.local/), turns run "
        "in this process, dev tokens (`Authorization: Bearer dev-<user>`). Turns left running "
        "by a process that is gone are resumed at start-up.",
    )
    serve.add_argument("--host", default=DEFAULT_HOST, help="address (default %(default)s)")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port (default %(default)s; 0 = free)"
    )
    serve.add_argument("--storage", metavar="URL", help="storage URL (TURNKEEP_STORAGE_URL)")
    serve.add_argument("--envelope", metavar="URL", help="envelope URL (TURNKEEP_ENVELOPE_URL)")
    serve.add_argument(
        "--model", metavar="SPEC", help="default model spec (TURNKEEP_MODEL; default scripted)"
    )
    serve.add_argument("--log-level", default="info", help="uvicorn log level")
    _add_agent(serve)


def _add_chat(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = sub.add_parser(
        "chat",
        help="interactive chat with streaming output",
        description="One line per turn, streamed. /help lists the chat commands (/notes, "
        "/cancel, /resume, /quit). Ctrl-C while a turn runs cancels it.",
    )
    chat.add_argument("--session", help="session id to continue (default: a new session)")
    chat.add_argument("--user", default=DEMO_USER, help="user id owning the session")
    chat.add_argument(
        "--model",
        metavar="SPEC",
        help="provider spec (default: TURNKEEP_MODEL or scripted; with --url: the server's "
        "default, or one of its allowed models)",
    )
    chat.add_argument(
        "--url", help="chat through the HTTP API at this base URL instead of in-process"
    )
    chat.add_argument(
        "--require-approval",
        metavar="TOOLS",
        help="set the session's toolApproval policy: comma-separated tool names ('*' = every "
        "tool) whose calls wait for your y/n (docs/approvals.md)",
    )
    chat.add_argument(
        "--token",
        help=f"with --url: bearer token (default: ${TOKEN_ENV}, else the dev token of --user)",
    )
    chat.add_argument(
        "--ws-url",
        metavar="WSS_URL",
        help=f"with --url: follow turns over this WebSocket API (default: ${WS_URL_ENV}, else "
        "the one the API names at GET /live), polling where it cannot be opened",
    )
    _add_agent(chat)
    chat.add_argument(
        "--turn-timeout",
        type=_positive_seconds,
        default=remote.DEFAULT_TURN_WALL_S,
        metavar="SECONDS",
        help="with --url: stop waiting for a turn after this long (default %(default)g)",
    )


def _add_sessions(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sessions = sub.add_parser(
        "sessions",
        help="list / show / notes / delete local sessions",
        description="Sessions of the local store (TURNKEEP_STORAGE_URL / TURNKEEP_ENVELOPE_URL, "
        "default .local/turnkeep.db).",
    )
    actions = sessions.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list", help="one line per session", description="One line per session."
    )
    listing.add_argument(
        "--children",
        action="store_true",
        help="also list sub-agent child sessions (each with its parent)",
    )
    for name, text in (
        ("show", "a session's details, its latest turn and who drives it"),
        ("notes", "a session's working notes"),
        (
            "delete",
            "delete a session, its sub-agent child sessions and everything stored for them "
            "(not while a turn runs)",
        ),
    ):
        action = actions.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        action.add_argument("session_id", metavar="SESSION_ID")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `turnkeep` command."""
    parser = argparse.ArgumentParser(
        prog="turnkeep",
        description=(__doc__ or "").splitlines()[0],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_serve(sub)
    _add_chat(sub)
    demo = sub.add_parser(
        "demo",
        help="run a scripted multi-turn conversation on SQLite",
        description="Scripted-model turns on local SQLite, streamed, each checked to retire "
        "its progress scope. Exit status 1 if any check fails.",
    )
    demo.add_argument(
        "--delay",
        type=_non_negative_seconds,
        default=0.0,
        help="seconds between streamed frames (to watch it stream)",
    )
    _add_agent(demo)
    _add_sessions(sub)
    add_usage_parser(sub)
    add_token_parser(sub)
    return parser


def _interrupt_on_sigterm() -> None:
    # `kill <pid>` of a chat or demo then ends its running turn honestly (like Ctrl-C).
    def handler(_signum: int, _frame: FrameType | None) -> None:
        raise Terminated

    signal.signal(signal.SIGTERM, handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `turnkeep` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "sessions":
            return _run_sessions(args, sys.stdout)
        if args.command == "usage":
            return _run_usage(args, sys.stdout)
        if args.command == "token":
            return run_token(args, sys.stdout, sys.stderr)
        _interrupt_on_sigterm()
        if args.command == "demo":
            return run_demo(args, sys.stdout)
        if args.url is not None and args.agent is not None:
            parser.error("--agent runs an agent in this process; with --url the server's runs")
        if args.url is None and args.token is not None:
            parser.error("--token needs --url (the in-process chat has no API to authenticate to)")
        if args.url is None and args.ws_url is not None:
            parser.error("--ws-url needs --url (turns start on the HTTP API)")
        if args.url is not None:
            try:
                remote.check_url(args.url)
                if args.ws_url is not None:
                    check_ws_url(args.ws_url)
            except ValueError as exc:
                parser.error(str(exc))
        return run_chat(args, sys.stdin, sys.stdout)
    except ConfigError as exc:
        sys.stderr.write(f"turnkeep {args.command}: {exc}\n")
        return CONFIG_EXIT_STATUS
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        return 130
