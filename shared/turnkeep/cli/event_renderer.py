"""Printing one turn's API events in a terminal (`turnkeep chat --url`): the `ChatOutput` a
renderer prints through and `TurnEventRenderer`, which shows every piece of text once and a
sub-agent's child turn as one line per tool call and result under its call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from turnkeep.cli.nested_lines import nested_call_line, nested_result_line
from turnkeep.cli.sse import apply_delta
from turnkeep.events.nested import TurnCursor
from turnkeep.harness.source_notices import ToolSourceNotice


class ChatOutput(Protocol):
    """Where a turn is printed (the CLI's `StreamPrinter`)."""

    def text(self, piece: str) -> None:
        """Assistant text, appended to the reply being shown."""
        ...

    def end_text(self) -> None:
        """Close the reply being shown (a no-op when none is)."""
        ...

    def tool_call(self, name: str, arguments: str) -> None:
        """One tool call the model made."""
        ...

    def tool_result(self, name: str, content: str, is_error: bool) -> None:
        """One finished tool call."""
        ...

    def notice(self, line: str) -> None:
        """A line of its own (status, errors)."""
        ...


def _parts_text(parts: object) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(
        str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("kind") == "text"
    )


class TurnEventRenderer:
    """Prints one turn's API events through a `ChatOutput`, each piece of text exactly once.

    Frames append their text to the reply of their `response_id`; the settled assistant entry
    with that id then prints only the part of its text the frames did not show (all of it when
    no frame was seen). Should the settled text not extend what streamed (a retried round), the
    whole settled text is printed after a notice rather than a silently wrong reply. Events at
    or below the highest `seq` already handled are ignored.
    """

    def __init__(self, output: ChatOutput) -> None:
        self.output = output
        self.cursor = TurnCursor()
        """Where the events shown so far end: the turn's seq and each child turn's."""
        self.frames_seen = 0
        self._shown: dict[str, str] = {}
        self._settled: set[str] = set()
        self.waiting = False
        """A live stream said the turn waits for an approval (its `status`)."""
        self.undecided: set[str] = set()
        """Calls of `approval_requested` events handled with no `approval_decided` yet."""

    @property
    def last_seq(self) -> int:
        """The highest seq of the turn's own events shown."""
        return self.cursor.seq

    def resume_cursor(self) -> int | str:
        """The cursor to read on from (the events page's, the stream's)."""
        return self.cursor.token()

    def on_event(self, event: Mapping[str, Any]) -> None:
        """Handle one event of a page (pages are fed in order)."""
        chain = _chain(event.get("nested"))
        op = chain[-1][1] if chain else None
        seq = event.get("seq")
        if isinstance(seq, int):
            if self.cursor.seen(seq, op):
                return
            self.cursor = self.cursor.moved(seq, op)
        if chain:
            self._nested([agent for agent, _ in chain], event)
            return
        kind = event.get("kind")
        if kind == "frame":
            self._frame(event)
        elif kind == "entry":
            self._entry(event)
        elif kind == "tool_source_unavailable":
            tools = event.get("tools")
            notice = ToolSourceNotice(
                str(event.get("source")),
                str(event.get("message", "")),
                tuple(str(t) for t in tools) if isinstance(tools, list) else (),
            )
            self.output.end_text()
            self.output.notice(notice.line())
        elif kind == "approval_requested":
            self.undecided.add(str(event.get("call_id")))
        elif kind == "approval_decided":
            self.undecided.discard(str(event.get("call_id")))

    def _nested(self, agents: list[str], event: Mapping[str, Any]) -> None:
        """A child turn's event: its tool calls and results, one line each, under the call."""
        if event.get("kind") != "entry":
            return
        lines: list[str] = []
        for part in event.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if event.get("role") == "assistant" and part.get("kind") == "tool_call":
                lines.append(
                    nested_call_line(agents, str(part.get("name")), str(part.get("arguments", "")))
                )
            elif event.get("role") == "tool" and part.get("kind") == "tool_result":
                lines.append(
                    nested_result_line(
                        agents,
                        str(part.get("name")),
                        str(part.get("content", "")),
                        bool(part.get("is_error", False)),
                    )
                )
        if lines:
            self.output.end_text()
        for line in lines:
            self.output.notice(line)

    def finish(self) -> None:
        """End the reply being shown (the turn ended)."""
        self.output.end_text()

    def on_delta(self, data: Mapping[str, Any]) -> None:
        """Handle one live delta of the stream (`response_id`, `offset`, `text`); a child
        turn's text is not printed (its tool calls and results are)."""
        if not data.get("nested"):
            self._piece(data)

    def _frame(self, event: Mapping[str, Any]) -> None:
        self.frames_seen += 1
        self._piece(event)

    def _piece(self, event: Mapping[str, Any]) -> None:
        """Streamed text by the stream's one rule (`cli/sse.apply_delta`): only what extends the
        text already shown is printed (a terminal cannot take text back)."""
        rid = str(event.get("response_id") or "")
        if rid in self._settled:
            return  # the entry already showed this round
        piece = event.get("text")
        if not isinstance(piece, str) or not piece:
            return
        shown = self._shown.get(rid, "")
        offset = event.get("offset")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            offset = len(shown)  # no usable offset: the piece extends what is shown
        whole = apply_delta(shown, offset, piece)
        if len(whole) > len(shown) and whole.startswith(shown):
            self._shown[rid] = whole
            self.output.text(whole[len(shown) :])

    def _entry(self, event: Mapping[str, Any]) -> None:
        role = event.get("role")
        parts = event.get("parts")
        if role == "assistant":
            rid = str(event.get("response_id") or event.get("entry_id") or "")
            self._settled.add(rid)
            shown = self._shown.pop(rid, "")
            full = _parts_text(parts)
            if full.startswith(shown):
                if full[len(shown) :]:
                    self.output.text(full[len(shown) :])
            else:
                self.output.end_text()
                self.output.notice("[the streamed reply was revised; the settled reply:]")
                self.output.text(full)
            self.output.end_text()
            if event.get("interrupted"):
                self.output.notice("[this reply was interrupted]")
            for part in parts if isinstance(parts, list) else []:
                if isinstance(part, dict) and part.get("kind") == "tool_call":
                    self.output.tool_call(str(part.get("name")), str(part.get("arguments", "")))
        elif role == "tool":
            for part in parts if isinstance(parts, list) else []:
                if isinstance(part, dict) and part.get("kind") == "tool_result":
                    self.output.tool_result(
                        str(part.get("name")),
                        str(part.get("content", "")),
                        bool(part.get("is_error", False)),
                    )
        # The user entry is the line just typed: not echoed.


def _chain(nested: object) -> list[tuple[str, str]]:
    """A nested event's calls as (agent, child op id), outermost first; [] for the turn's own."""
    if not isinstance(nested, list):
        return []
    return [
        (str(call.get("agent")), str(call.get("op_id")))
        for call in nested
        if isinstance(call, dict)
    ]
