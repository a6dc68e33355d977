"""The `turnkeep` command: `demo` (a scripted multi-turn run on SQLite) and `chat` (interactive).

Both run turns in-process through the same step functions the Step Functions path uses, with
storage and envelopes in `sqlite:///<cwd>/.local/turnkeep.db` unless TURNKEEP_STORAGE_URL /
TURNKEEP_ENVELOPE_URL say otherwise. `chat --url URL` instead talks to the HTTP API
(`turnkeep.cli_remote`), with the same printer and the same line commands.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from typing import TextIO

from turnkeep import cli_remote
from turnkeep.harness import HarnessDeps, TurnConflictError, TurnResult, run_turn
from turnkeep.harness.orchestrator import ToolOutcome
from turnkeep.harness.state import (
    CHECKPOINT_NS,
    MEMO_NS,
    frames_address,
    load_record,
    load_state,
    op_scope,
    response_id,
)
from turnkeep.providers.base import (
    ResponseDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime import build_runtime
from turnkeep.settings import TurnkeepSettings

DEMO_USER = "demo-user"
TOKEN_ENV = "TURNKEEP_API_TOKEN"  # nosec B105  # an environment variable name, not a token
"""Bearer token of `chat --url` when `--token` is not given (keeps it out of the process list)."""
DEMO_SCRIPT: tuple[str, ...] = (
    "hello turnkeep",
    "remember the deploy region is eu-west-1",
    'call calculator {"expression": "6*7"}\n'
    "call clock_now {}\n"
    "then\n"
    'call echo {"text": "second round, two calls"}\n'
    'call calculator {"expression": "2**10"}',
    "remember the answer is 42",
    "what do you remember?",
)


class StreamPrinter:
    """Prints a turn as it streams: assistant text, tool calls, tool results, notices.

    Fed by either source: provider stream events and tool outcomes of an in-process turn
    (`on_event`, `on_tool`), or the API's turn events through `cli_remote.TurnEventRenderer`
    (the `ChatOutput` methods `text`, `end_text`, `tool_call`, `tool_result`, `notice`).
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._in_text = False
        self._calls: dict[int, list[str]] = {}

    def on_event(self, event: StreamEvent) -> None:
        """Print one stream event; tool calls once their round is done (arguments complete)."""
        if isinstance(event, TextDelta):
            self.text(event.text)
        elif isinstance(event, ToolCallStart):
            self.end_text()
            self._calls[event.index] = [event.name, ""]
        elif isinstance(event, ToolCallDelta):
            self._calls.setdefault(event.index, ["?", ""])[1] += event.arguments
        elif isinstance(event, ResponseDone):
            self.end_text()
            for name, args in self._calls.values():
                self.tool_call(name, args)
            self._calls.clear()
        self.out.flush()

    def on_tool(self, outcome: ToolOutcome) -> None:
        """Print one finished tool call."""
        self.tool_result(outcome.name, outcome.content, outcome.is_error)

    def text(self, piece: str) -> None:
        """Append assistant text to the reply being shown (`assistant> ` starts one)."""
        if not self._in_text:
            self.out.write("assistant> ")
            self._in_text = True
        self.out.write(piece)
        self.out.flush()

    def end_text(self) -> None:
        """End the reply being shown with a newline (nothing when none is)."""
        if self._in_text:
            self.out.write("\n")
            self._in_text = False
            self.out.flush()

    def tool_call(self, name: str, arguments: str) -> None:
        """One line per tool call."""
        self.end_text()
        self.out.write(f"  -> tool call {name} {arguments}\n")
        self.out.flush()

    def tool_result(self, name: str, content: str, is_error: bool) -> None:
        """One line per tool result: its first line, and how many lines are not shown."""
        self.end_text()
        mark = "error" if is_error else "ok"
        lines = content.splitlines()
        shown = lines[0] if lines else ""
        if len(lines) > 1:  # say what is not shown rather than hide it
            more = len(lines) - 1
            shown += f" (+{more} more line{'s' if more > 1 else ''})"
        self.out.write(f"  <- {name} [{mark}] {shown}\n")
        self.out.flush()

    def notice(self, line: str) -> None:
        """A line of its own, after any reply being shown."""
        self.end_text()
        self.out.write(line + "\n")
        self.out.flush()


DEMO_LEGEND = """\
The model is `scripted`: a deterministic offline model that calls real tools through the same
path as Bedrock or an OpenAI-compatible model would. Each turn prints:
  user>       the message sent
  assistant>  the model's reply, as it streams
  ->          a tool call the model made      <-  its result ([ok] or [error])
  [turn ...]  how the turn ended: status, model rounds, tokens
  [scope ...] whether the turn's progress (streamed frames, tool checkpoints) was retired
              by its final commit, as it must be
"""


def _describe(result: TurnResult) -> str:
    rounds = f"{result.rounds} model round{'' if result.rounds == 1 else 's'}"
    text = f"[turn {result.op_id}: {result.status}, {rounds}"
    text += f", {result.usage.input_tokens} in / {result.usage.output_tokens} out tokens"
    return text + (f", error: {result.error}]" if result.error else "]")


def _scope_left(deps: HarnessDeps, session_id: str, result: TurnResult) -> int:
    """Frames still stored in the operation's scope (0 once retired)."""
    storage = deps.open_storage(session_id)
    try:
        left = sum(
            len(storage.read_list(frames_address(result.op_id, response_id(result.op_id, r))))
            for r in range(result.rounds + 1)
        )
        for namespace in (CHECKPOINT_NS, MEMO_NS):
            left += len(storage.scan_values(namespace, "", op_scope(result.op_id)))
        # The operation state must be gone and the result record present.
        ended = load_state(storage, result.op_id) is None
        left += int(not ended or load_record(storage, result.op_id) is None)
        return left
    finally:
        storage.close()


def run_demo(args: argparse.Namespace, out: TextIO) -> int:
    """Run DEMO_SCRIPT as turns of one new session and check each operation scope is gone."""
    settings = TurnkeepSettings()
    provider = ScriptedProvider(frame_delay=args.delay)
    runtime = build_runtime(settings, provider=provider)
    deps, envelopes, storage_url = runtime.deps, runtime.envelopes, runtime.storage_url
    session_id = f"demo-{uuid.uuid4().hex[:12]}"
    envelopes.create(session_id, DEMO_USER, {"title": "turnkeep demo"})
    out.write(f"turnkeep demo: session {session_id} in {storage_url}\n")
    out.write(DEMO_LEGEND)
    printer = StreamPrinter(out)
    failures = 0
    try:
        for text in DEMO_SCRIPT:
            out.write("\nuser> " + text.replace("\n", "\n      ") + "\n")
            result = run_turn(
                deps,
                session_id,
                DEMO_USER,
                text,
                on_event=printer.on_event,
                on_tool=printer.on_tool,
            )
            out.write(_describe(result) + "\n")
            left = _scope_left(deps, session_id, result)
            out.write(
                f"[scope {result.op_id}: "
                + ("retired, nothing left]" if left == 0 else f"NOT retired: {left} items]")
                + "\n"
            )
            failures += int(result.status != "completed" or left != 0)
        envelope = envelopes.get(session_id)
        notes = envelope.working_notes if envelope is not None else None
        out.write(f"\nworking notes folded into the next turn:\n{notes or '(none)'}\n")
        storage = deps.open_storage(session_id)
        try:
            stats = storage.get_stats()
        finally:
            storage.close()
        out.write(
            f"session {session_id}: {stats.message_count} transcript messages, "
            f"{stats.usage_rows} model rounds\n"
        )
    finally:
        runtime.close()
    out.write("demo " + ("OK" if failures == 0 else f"FAILED ({failures} problems)") + "\n")
    return 0 if failures == 0 else 1


def _repl(
    inp: TextIO,
    out: TextIO,
    *,
    notes: Callable[[], str | None],
    turn: Callable[[str], None],
) -> None:
    """Read lines until `/quit` or EOF: `/notes` prints the working notes, any other is a turn."""
    out.write("type a message; /notes shows the working notes; /quit ends\n")
    while True:
        out.write("you> ")
        out.flush()
        line = inp.readline()
        if not line:
            out.write("\n")
            return
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            return
        if text == "/notes":
            out.write((notes() or "(no working notes)") + "\n")
            continue
        turn(text)


def run_chat(args: argparse.Namespace, inp: TextIO, out: TextIO) -> int:
    """Interactive line-based chat: each line is one turn, streamed; `/quit` or EOF ends."""
    if args.url is not None:
        return run_remote_chat(args, inp, out, sys.stderr)
    settings = TurnkeepSettings()
    model = args.model or settings.model
    runtime = build_runtime(settings.model_copy(update={"model": model}))
    deps, envelopes, storage_url = runtime.deps, runtime.envelopes, runtime.storage_url
    session_id = args.session or f"chat-{uuid.uuid4().hex[:12]}"
    if envelopes.get(session_id) is None:
        envelopes.create(session_id, args.user, {"title": "turnkeep chat"})
    out.write(f"turnkeep chat: session {session_id} ({model}) in {storage_url}\n")
    printer = StreamPrinter(out)

    def notes() -> str | None:
        envelope = envelopes.get(session_id)
        return envelope.working_notes if envelope is not None else None

    def turn(text: str) -> None:
        try:
            result = run_turn(
                deps,
                session_id,
                args.user,
                text,
                on_event=printer.on_event,
                on_tool=printer.on_tool,
            )
        except TurnConflictError as exc:
            out.write(f"[{exc}]\n")
            return
        if result.status != "completed":
            out.write(_describe(result) + "\n")

    try:
        _repl(inp, out, notes=notes, turn=turn)
    finally:
        runtime.close()
    return 0


def run_remote_chat(args: argparse.Namespace, inp: TextIO, out: TextIO, err: TextIO) -> int:
    """`chat --url`: the same REPL over the HTTP API; 1 when the API cannot be reached."""
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    printer = StreamPrinter(out)
    try:
        client = cli_remote.open_client(args.url, token=token, user=args.user)
    except (ValueError, cli_remote.ApiUnreachableError) as exc:
        err.write(f"turnkeep chat: {exc}\n")
        return 2
    chat = cli_remote.RemoteChat(client, printer, turn_wall_s=args.turn_timeout, model=args.model)

    def turn(text: str) -> None:
        try:
            chat.turn(text)
        except cli_remote.RemoteApiError as exc:
            printer.notice(f"[{exc}]")

    def notes() -> str | None:
        try:
            return chat.notes()
        except cli_remote.RemoteApiError as exc:
            return f"[{exc}]"

    try:
        with client:
            try:
                session_id = chat.open_session(args.session)
            except cli_remote.RemoteApiError as exc:
                err.write(f"turnkeep chat: the session could not be opened: {exc}\n")
                return 1
            who = "bearer token" if token is not None else f"dev user {args.user}"
            out.write(f"turnkeep chat: session {session_id} at {args.url} ({who})\n")
            _repl(inp, out, notes=notes, turn=turn)
    except cli_remote.ApiUnreachableError as exc:
        printer.end_text()
        err.write(f"turnkeep chat: {exc}\n")
        return 1
    return 0


def _positive_seconds(value: str) -> float:
    seconds = float(value)
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {value!r}")
    return seconds


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `turnkeep` command."""
    parser = argparse.ArgumentParser(prog="turnkeep", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a scripted multi-turn conversation on SQLite")
    demo.add_argument(
        "--delay", type=float, default=0.0, help="seconds between streamed frames (visual)"
    )
    chat = sub.add_parser("chat", help="interactive chat with streaming output")
    chat.add_argument("--session", help="session id to continue (default: a new session)")
    chat.add_argument("--user", default=DEMO_USER, help="user id owning the session")
    chat.add_argument(
        "--model",
        help="provider spec (default: TURNKEEP_MODEL or scripted; with --url: the server's "
        "default, or one of its allowed models)",
    )
    chat.add_argument(
        "--url", help="chat through the HTTP API at this base URL instead of in-process"
    )
    chat.add_argument(
        "--token",
        help=f"with --url: bearer token (default: ${TOKEN_ENV}, else the dev token of --user)",
    )
    chat.add_argument(
        "--turn-timeout",
        type=_positive_seconds,
        default=cli_remote.DEFAULT_TURN_WALL_S,
        metavar="SECONDS",
        help="with --url: stop waiting for a turn after this long (default %(default)g)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `turnkeep` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        return run_demo(args, sys.stdout)
    if args.url is None and args.token is not None:
        parser.error("--token needs --url (the in-process chat has no API to authenticate to)")
    if args.url is not None:
        try:
            cli_remote.check_url(args.url)
        except ValueError as exc:
            parser.error(str(exc))
    try:
        return run_chat(args, sys.stdin, sys.stdout)
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
