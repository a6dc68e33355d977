"""Terminal output of a turn, shared by the in-process chat/demo and `chat --url`."""

from __future__ import annotations

from typing import Final, TextIO

from turnkeep.cli.usage_line import usage_text
from turnkeep.harness import TurnResult
from turnkeep.harness.orchestrator import ToolOutcome
from turnkeep.harness.source_notices import ToolSourceNotice
from turnkeep.providers.base import (
    ResponseDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)

FOLD_CHARS: Final = 300
"""A tool result longer than this is folded to one line (its size, and `/show N`)."""
FOLD_LINE_CHARS: Final = 120


class StreamPrinter:
    """Prints a turn as it streams: assistant text, tool calls, tool results, notices.

    Fed by either source: provider stream events and tool outcomes of an in-process turn
    (`on_event`, `on_tool`), or the API's turn events through
    `turnkeep.cli.event_renderer.TurnEventRenderer` (the `ChatOutput` methods `text`, `end_text`,
    `tool_call`, `tool_result`, `notice`).
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._in_text = False
        self._calls: dict[int, list[str]] = {}
        self.results: list[tuple[str, str, bool]] = []
        """Every tool result shown, in order: (name, content, is_error); `/show N` prints one."""

    def on_event(self, event: StreamEvent | ToolSourceNotice) -> None:
        """Print one stream event; tool calls once their round is done (arguments complete);
        a line for a tool source the round goes on without."""
        if isinstance(event, ToolSourceNotice):
            self.notice(event.line())
        elif isinstance(event, TextDelta):
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
        """One line per tool result: its first line, and how many lines are not shown; a long
        result folded to the start of that line, its size and the `/show N` that prints it."""
        self.end_text()
        self.results.append((name, content, is_error))
        mark = "error" if is_error else "ok"
        lines = content.splitlines()
        shown = lines[0] if lines else ""
        if len(content) > FOLD_CHARS:  # say what is not shown rather than hide it
            if len(shown) > FOLD_LINE_CHARS:
                shown = shown[:FOLD_LINE_CHARS] + "…"
            shown += (
                f" [folded: {len(content):,} characters, {len(lines):,} line"
                f"{'s' if len(lines) != 1 else ''}; /show {len(self.results)} prints it whole]"
            )
        elif len(lines) > 1:
            more = len(lines) - 1
            shown += f" (+{more} more line{'s' if more > 1 else ''})"
        self.out.write(f"  <- {name} [{mark}] {shown}\n")
        self.out.flush()

    def whole(self, which: str) -> str:
        """The text of `/show [N]`: tool result N (1-based; the latest without N) whole, as
        the model got it, or a line saying why there is none."""
        if not self.results:
            return "(no tool results shown yet)"
        which = which.strip()
        if not which:
            number = len(self.results)
        elif which.isdigit() and 1 <= int(which) <= len(self.results):
            number = int(which)
        else:
            return f"/show takes a tool result's number, 1 to {len(self.results)} (got {which!r})"
        name, content, is_error = self.results[number - 1]
        mark = "error" if is_error else "ok"
        return f"  <- {name} [{mark}] #{number}, {len(content):,} characters:\n{content}"

    def approval_request(self, name: str, arguments: str) -> None:
        """A call that waits for the person at the keyboard."""
        self.end_text()
        self.out.write(f"  ?? approval needed: tool call {name} {arguments}\n")
        self.out.flush()

    def prompt(self, text: str) -> None:
        """A question on the current line (the answer is read by the caller)."""
        self.end_text()
        self.out.write(text)
        self.out.flush()

    def notice(self, line: str) -> None:
        """A line of its own, after any reply being shown."""
        self.end_text()
        self.out.write(line + "\n")
        self.out.flush()


def describe(result: TurnResult) -> str:
    """`[turn <id>: <status>, N model rounds, X in / Y out tokens(, error: …)]`."""
    rounds = f"{result.rounds} model round{'' if result.rounds == 1 else 's'}"
    text = f"[turn {result.op_id}: {result.status}, {rounds}"
    text += ", " + usage_text(
        result.usage.input_tokens,
        result.usage.output_tokens,
        result.usage.cache_read_tokens,
        estimated=result.usage.estimated,
    )
    return text + (f", error: {result.error}]" if result.error else "]")
