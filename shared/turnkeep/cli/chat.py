"""`turnkeep chat`: one line per turn, in-process (local SQLite) or over the HTTP API (`--url`).

Lines starting with `/` are chat commands, never sent to the model (`CHAT_HELP`). Ctrl-C
while a turn runs cancels that turn (in-process: ended as aborted; `--url`: a cancel request to
the server) and the chat goes on; Ctrl-C or EOF at the prompt ends the chat.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import uuid
from typing import Protocol, TextIO

from turnkeep.cli import remote
from turnkeep.cli.approvals import Ask, prompt_asker
from turnkeep.cli.attach import AttachFailed, attach_local, attach_remote, attached_line
from turnkeep.cli.child_progress import ChildProgress
from turnkeep.cli.printer import StreamPrinter, describe
from turnkeep.cli.result_block import result_block
from turnkeep.cli.ws import WS_URL_ENV, check_ws_url
from turnkeep.envelope import turn_run_id, turn_status
from turnkeep.harness import HarnessDeps, TurnConflictError, TurnResult
from turnkeep.harness.approvals import ApprovalError, ApprovalInvalidError
from turnkeep.harness.attachment_checks import refusal_for
from turnkeep.harness.child_approvals import decide_in_tree, pending_requests
from turnkeep.harness.io import AttachmentRef
from turnkeep.harness.local_owner import (
    TurnFinding,
    drive,
    end_interrupted,
    end_orphan,
    forget_owner,
    inspect_turn,
    run_owned_turn,
    settle_ended,
)
from turnkeep.harness.orchestrator import ToolOutcome
from turnkeep.harness.steps import abort_turn, cancel_turn
from turnkeep.runtime.build import Runtime

TOKEN_ENV = "TURNKEEP_API_TOKEN"  # nosec B105  # an environment variable name, not a token
"""Bearer token of `chat --url` when `--token` is not given (keeps it out of the process list)."""

CHAT_HELP = """\
commands (anything else is a message to the model):
  /notes    show the session's working notes
  /cancel   cancel the session's running turn (also: Ctrl-C while a turn runs)
  /resume   continue a turn left running (e.g. by a chat that was killed) and show it
  /show [N] print tool result N (the latest without N) whole, as the model got it
  /attach PATH  attach a file (image or document) to your next message
  /help     this list
  /quit     end the chat (also: /exit, Ctrl-D)
a line ending with \\ goes on on the next one: a message of several lines"""


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill <pid>`): the running turn is ended like on Ctrl-C, then the chat exits."""


class ChatBackend(Protocol):
    """What the REPL drives: a local session or one behind the HTTP API."""

    def turn(self, text: str) -> None:
        """Run one turn for `text`, printing it; Ctrl-C inside cancels it."""
        ...

    def notes(self) -> str | None:
        """The working notes (None when there are none)."""
        ...

    def cancel(self) -> str:
        """Cancel the running turn; a line saying what happened."""
        ...

    def resume(self) -> str | None:
        """Continue a turn left running, printing it; a line when there is nothing to do."""
        ...

    @property
    def printer(self) -> StreamPrinter:
        """Where the turns are printed (it keeps the tool results `/show` prints)."""
        ...

    def attach(self, path: str) -> str:
        """Upload `path` for the next message; the line to print (what, or why not)."""
        ...


def repl(inp: TextIO, out: TextIO, backend: ChatBackend) -> None:
    """Read lines until `/quit`, EOF or Ctrl-C at the prompt; `/…` are commands."""
    out.write("type a message; /help lists the commands\n")
    while True:
        out.write("you> ")
        out.flush()
        try:
            line = _continued(inp.readline(), inp, out)
        except KeyboardInterrupt:
            out.write("\n")
            return
        if not line:
            out.write("\n")
            return
        text = line.strip()
        if not text:
            continue
        command = text.lower()
        if command in ("/quit", "/exit"):
            return
        if command == "/help":
            out.write(CHAT_HELP + "\n")
        elif command == "/notes":
            out.write((backend.notes() or "(no working notes)") + "\n")
        elif command == "/cancel":
            out.write(backend.cancel() + "\n")
        elif command == "/resume":
            said = backend.resume()
            if said is not None:
                out.write(said + "\n")
        elif command.startswith("/attach ") or command == "/attach":
            path = text[len("/attach") :].strip()
            out.write((backend.attach(path) if path else "usage: /attach PATH") + "\n")
        elif command == "/show" or command.startswith("/show "):
            out.write(backend.printer.whole(text[len("/show") :]) + "\n")
        elif text.startswith("/") and " " not in text:
            out.write(f"unknown command {text}; /help lists the commands\n")
        else:
            backend.turn(text)
        out.flush()


def _continued(line: str, inp: TextIO, out: TextIO) -> str:
    """`line` with the lines that continue it: a line ending with `\\` goes on on the next
    one, so one message may span lines (a multi-round script: providers/scripted.py)."""
    while line.rstrip("\r\n").endswith("\\"):
        out.write("...> ")
        out.flush()
        more = inp.readline()
        line = line.rstrip("\r\n")[:-1].rstrip() + "\n" + more
        if not more:
            break
    return line


class LocalChat:
    """A session in the local store; turns run in this process as their recorded owner."""

    def __init__(
        self,
        runtime: Runtime,
        session_id: str,
        user: str,
        model: str,
        printer: StreamPrinter,
        *,
        ask: Ask | None = None,
    ) -> None:
        self.ask = ask
        self._reported: set[ToolOutcome] = set()
        self.runtime = runtime
        self.deps: HarnessDeps = runtime.deps
        if self.deps.agent.agents:
            # A sub-agent's child turn prints its tool calls under the call as it runs.
            progress = ChildProgress(self.deps, self.deps.live, printer.notice)
            self.deps = dataclasses.replace(self.deps, live=progress)
        self.session_id = session_id
        self.user = user
        self.model = model
        self.printer = printer
        self._attached: list[AttachmentRef] = []

    def attach(self, path: str) -> str:
        try:
            ref = attach_local(self.deps, self.session_id, path)
        except AttachFailed as exc:
            return f"[attach refused: {exc}]"
        refused = refusal_for(self.model, [*self._attached, ref])
        if refused is not None:
            return f"[attach refused: {refused}]"
        self._attached.append(ref)
        return attached_line(ref.name, ref.media_type, ref.size)

    def opening_notice(self) -> str | None:
        """What the chat finds at open: a turn left by a dead process, or one still driven."""
        finding = inspect_turn(self.deps, self.session_id)
        if finding is None:
            return None
        if finding.verdict == "ended":
            settle_ended(self.deps, finding)
            return None
        if finding.verdict == "orphaned":
            return (
                f"[{finding.describe()}: /resume continues it, /cancel ends it; "
                "a new message ends it first]"
            )
        return f"[{finding.describe()}; /cancel asks it to stop]"

    def turn(self, text: str) -> None:
        finding = inspect_turn(self.deps, self.session_id)
        if finding is not None and not self._clear_for_new_turn(finding):
            return
        self._reported.clear()
        attached, self._attached = self._attached, []
        try:
            result = run_owned_turn(
                self.deps,
                self.session_id,
                self.user,
                text,
                model=self.model,
                on_event=self.printer.on_event,
                on_tool=self._on_tool,
                attachments=attached,
            )
        except TurnConflictError as exc:
            self.printer.notice(f"[{exc}; /cancel asks it to stop]")
            return
        except Terminated:
            raise
        except KeyboardInterrupt:
            self.printer.notice("[interrupted: the turn was cancelled (aborted)]")
            return
        try:
            while result.status == "awaiting_approval" and self.ask is not None:
                result = self._approve(result)
        except KeyboardInterrupt as exc:
            end_interrupted(self.deps, self.session_id, result.op_id)
            self.printer.notice("[interrupted: the turn was cancelled (aborted)]")
            if isinstance(exc, Terminated):
                raise
            return
        if result.output is not None:
            self.printer.notice(result_block(result.output))
        # Every turn ends with its line (status, rounds, tokens), as `chat --url` prints it.
        self.printer.notice(describe(result))

    def _approve(self, result: TurnResult) -> TurnResult:
        """Ask about each waiting call, record the answers, drive the turn on."""
        if self.ask is None:  # the caller checks; nothing to ask with
            return result
        # The turn's own calls and its sub-agents' child turns' (docs/approvals.md).
        for request in pending_requests(self.deps, self.session_id, result.op_id):
            call = request.call
            where = f" [sub-agent {' > '.join(request.path)}]" if request.path else ""
            while True:
                answer = self.ask(f"{call.name}{where}", call.arguments)
                try:
                    decide_in_tree(
                        self.deps,
                        self.session_id,
                        result.op_id,
                        call.call_id,
                        user_id=self.user,
                        decision=answer.decision,
                        reason=answer.reason,
                        arguments=answer.arguments,
                    )
                except ApprovalInvalidError as exc:
                    self.printer.notice(f"[{exc}; answer again]")
                    continue
                except ApprovalError as exc:
                    self.printer.notice(f"[{exc}]")
                break
        return drive(
            self.deps,
            self.session_id,
            result.op_id,
            on_event=self.printer.on_event,
            on_tool=self._on_tool,
        )

    def _on_tool(self, outcome: ToolOutcome) -> None:
        # A turn driven again after a decision reports the round's finished calls once more.
        if outcome in self._reported:
            return
        self._reported.add(outcome)
        self.printer.on_tool(outcome)

    def _clear_for_new_turn(self, finding: TurnFinding) -> bool:
        if finding.verdict == "ended":
            settle_ended(self.deps, finding)
            return True
        if finding.verdict == "orphaned":
            result = end_orphan(
                self.deps,
                finding,
                f"abandoned: {finding.owner.describe() if finding.owner else 'its process'} "
                "stopped while driving it; ended when a new message was sent",
            )
            self.printer.notice(f"[{finding.describe()}; ended it: {result.status}]")
            return True
        self.printer.notice(f"[{finding.describe()}; wait for it, or /cancel]")
        return False

    def notes(self) -> str | None:
        envelope = self.deps.envelopes.get(self.session_id)
        return envelope.working_notes if envelope is not None else None

    def cancel(self) -> str:
        finding = inspect_turn(self.deps, self.session_id)
        if finding is None:
            envelope = self.deps.envelopes.get(self.session_id)
            meta = envelope.meta if envelope is not None else {}
            waiting = turn_run_id(meta)
            if turn_status(meta) == "awaiting_approval" and isinstance(waiting, str):
                cancelled = cancel_turn(self.deps, self.session_id, waiting)
                return f"[turn {waiting} (awaiting approval) cancelled: {cancelled.status}]"
            return "[no turn is running]"
        if finding.verdict == "ended":
            settle_ended(self.deps, finding)
            return f"[turn {finding.op_id} had already ended]"
        if finding.verdict == "orphaned":
            result = abort_turn(self.deps, self.session_id, finding.op_id)
            forget_owner(self.deps, self.session_id, finding.op_id)
            return f"[turn {finding.op_id} cancelled: {result.status}]"
        cancel_turn(self.deps, self.session_id, finding.op_id)
        return f"[cancel requested: {finding.describe()}; it stops at its next step]"

    def resume(self) -> str | None:
        finding = inspect_turn(self.deps, self.session_id)
        if finding is None:
            return "[no turn to resume]"
        if finding.verdict == "ended":
            settle_ended(self.deps, finding)
            return f"[turn {finding.op_id} had already ended]"
        if finding.verdict != "orphaned":
            return f"[{finding.describe()}; not resumed]"
        self.printer.notice(f"[resuming turn {finding.op_id}]")
        try:
            result = drive(
                self.deps,
                self.session_id,
                finding.op_id,
                on_event=self.printer.on_event,
                on_tool=self.printer.on_tool,
            )
        except KeyboardInterrupt as exc:
            end_interrupted(self.deps, self.session_id, finding.op_id)
            if isinstance(exc, Terminated):
                raise
            return "[interrupted: the turn was cancelled (aborted)]"
        self.printer.end_text()
        return describe(result)


def run_local_chat(args: argparse.Namespace, runtime: Runtime, inp: TextIO, out: TextIO) -> int:
    """The in-process chat on `runtime` (its settings' model is recorded with each turn)."""
    model = runtime.settings.model
    envelopes = runtime.envelopes
    session_id = args.session or f"chat-{uuid.uuid4().hex[:12]}"
    if envelopes.get(session_id) is None:
        envelopes.create(session_id, args.user, {"title": "turnkeep chat"})
    if args.require_approval is not None:
        envelope = envelopes.get(session_id)
        host = envelope.host_meta() if envelope is not None else {}
        envelopes.put_host_meta(
            session_id, args.user, {**host, "toolApproval": args.require_approval}
        )
    agent = runtime.deps.agent.name
    out.write(
        f"turnkeep chat: session {session_id} (agent {agent}, model {model}) in "
        f"{runtime.storage_url}\n"
    )
    printer = StreamPrinter(out)
    chat = LocalChat(runtime, session_id, args.user, model, printer, ask=prompt_asker(inp, printer))
    notice = chat.opening_notice()
    if notice is not None:
        out.write(notice + "\n")
    repl(inp, out, chat)
    return 0


class RemoteChatBackend:
    """The REPL's backend over the HTTP API (`remote.RemoteChat`)."""

    def __init__(self, chat: remote.RemoteChat, printer: StreamPrinter) -> None:
        self.chat = chat
        self.printer = printer
        self._attached: list[str] = []

    def attach(self, path: str) -> str:
        try:
            ref = attach_remote(self.chat, path)
        except AttachFailed as exc:
            return f"[attach refused: {exc}]"
        except remote.ApiUnreachableError as exc:
            return f"[attach failed: {exc}]"
        self._attached.append(ref.attachment_id)
        return attached_line(ref.name, ref.media_type, ref.size)

    def turn(self, text: str) -> None:
        attached, self._attached = self._attached, []
        try:
            self.chat.turn(text, attached)
        except remote.RemoteApiError as exc:
            self.printer.notice(f"[{exc}]")
        except KeyboardInterrupt as exc:
            self.printer.notice(self._cancel_current())
            if isinstance(exc, Terminated):
                raise

    def _cancel_current(self) -> str:
        turn_id, self.chat.current_turn = self.chat.current_turn, None
        if turn_id is None:
            return "[interrupted]"
        try:
            return "[interrupted: " + self.chat.cancel(turn_id) + "]"
        except remote.RemoteApiError as exc:
            return f"[interrupted; the cancel of turn {turn_id} failed: {exc}]"

    def notes(self) -> str | None:
        try:
            return self.chat.notes()
        except remote.RemoteApiError as exc:
            return f"[{exc}]"

    def cancel(self) -> str:
        try:
            turn_id = self.chat.running_turn()
            if turn_id is None:
                return "[no turn is running]"
            return f"[{self.chat.cancel(turn_id)}]"
        except remote.RemoteApiError as exc:
            return f"[{exc}]"

    def resume(self) -> str | None:
        # The server drives its turns; resuming here means following the running one.
        try:
            turn_id = self.chat.running_turn()
            if turn_id is None:
                return "[no turn is running]"
            self.printer.notice(f"[following turn {turn_id}]")
            self.chat.follow(turn_id)
        except remote.RemoteApiError as exc:
            return f"[{exc}]"
        except KeyboardInterrupt as exc:
            said = self._cancel_current()
            if isinstance(exc, Terminated):
                raise
            return said
        return None


def run_remote_chat(args: argparse.Namespace, inp: TextIO, out: TextIO, err: TextIO) -> int:
    """`chat --url`: the same REPL over the HTTP API; 1 when the API cannot be reached."""
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    printer = StreamPrinter(out)
    given = getattr(args, "ws_url", None)
    ws_url = given or os.environ.get(WS_URL_ENV) or None
    try:
        client = remote.open_client(args.url, token=token, user=args.user)
        if ws_url is not None:
            check_ws_url(ws_url, "--ws-url" if given else WS_URL_ENV)
    except (ValueError, remote.ApiUnreachableError) as exc:
        err.write(f"turnkeep chat: {exc}\n")
        return 2
    chat = remote.RemoteChat(
        client, printer, turn_wall_s=args.turn_timeout, model=args.model, ws_url=ws_url
    )
    chat.ask = prompt_asker(inp, printer)
    try:
        with client:
            try:
                session_id = chat.open_session(args.session)
                if args.require_approval is not None:
                    chat.require_approval(args.require_approval)
                ws_url = chat.discover_live()
            except remote.RemoteApiError as exc:
                hint = remote.url_hint(client, exc)
                err.write(f"turnkeep chat: the session could not be opened: {exc}\n")
                if hint is not None:
                    err.write(f"turnkeep chat: {hint}\n")
                return 1
            who = "bearer token" if token is not None else f"dev user {args.user}"
            live = f", live over {ws_url}" if ws_url is not None else ""
            out.write(f"turnkeep chat: session {session_id} at {args.url} ({who}{live})\n")
            repl(inp, out, RemoteChatBackend(chat, printer))
    except remote.ApiUnreachableError as exc:
        printer.end_text()
        err.write(f"turnkeep chat: {exc}\n")
        return 1
    return 0
