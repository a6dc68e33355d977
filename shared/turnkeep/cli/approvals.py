"""The chat's approval prompt, shared by the in-process chat and `chat --url`: shows a call that
waits for a person through the chat's printer and asks y / n / e (edit the arguments)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from turnkeep.cli.printer import StreamPrinter


@dataclass(frozen=True, slots=True)
class Answer:
    """A person's answer to one approval request."""

    decision: Literal["approve", "deny", "edit"]
    reason: str | None = None
    arguments: dict[str, Any] | None = None


Ask = Callable[[str, str], Answer]
"""(tool name, arguments as JSON text) -> the answer."""


def prompt_asker(inp: TextIO, printer: StreamPrinter) -> Ask:
    """Ask on `inp` (the chat's own input), showing the request with `printer`."""

    def ask(tool: str, arguments: str) -> Answer:
        printer.approval_request(tool, arguments)
        while True:
            line = _read(inp, printer, "approve? [y]es / [n]o / [e]dit: ")
            if line is None:  # input ended: nobody can approve
                return Answer("deny", "no answer: the chat's input ended")
            choice = line.strip().lower()
            if choice in ("y", "yes"):
                return Answer("approve")
            if choice in ("n", "no"):
                reason = _read(inp, printer, "reason (optional): ")
                return Answer("deny", (reason or "").strip() or None)
            if choice in ("e", "edit"):
                text = _read(inp, printer, "arguments (a JSON object): ")
                try:
                    parsed = json.loads(text or "")
                except json.JSONDecodeError as exc:
                    printer.notice(f"[not JSON: {exc.msg}; answer again]")
                    continue
                if not isinstance(parsed, dict):
                    printer.notice("[the arguments must be a JSON object; answer again]")
                    continue
                return Answer("edit", None, parsed)
            printer.notice("[answer y, n or e]")

    return ask


def _read(inp: TextIO, printer: StreamPrinter, prompt: str) -> str | None:
    printer.prompt(prompt)
    line = inp.readline()
    return line if line else None
