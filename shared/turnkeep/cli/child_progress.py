"""`turnkeep chat` (in-process) shows a sub-agent's child turn as it runs: a live sink in front
of the runtime's that prints each child tool call and result, one line, indented under the
call (the same lines as `chat --url`: `turnkeep.cli.nested_lines`)."""

from __future__ import annotations

from collections.abc import Callable

from turnkeep.cli.nested_lines import nested_call_line, nested_result_line
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.live import Committed, LiveDelta, LiveSink
from turnkeep.harness.subagents import CHILD_SESSION_PREFIX, load_link
from turnkeep.storage import Entry


class ChildProgress:
    """A `LiveSink`: hands everything to `inner` (if any) and prints child turns' tools."""

    def __init__(
        self, deps: HarnessDeps, inner: LiveSink | None, notice: Callable[[str], None]
    ) -> None:
        self._deps = deps
        self._inner = inner
        self._notice = notice
        self._agents: dict[str, list[str]] = {}

    def delta(
        self, session_id: str, op_id: str, delta: LiveDelta, so_far: Callable[[], str]
    ) -> None:
        """Passed on: a child's text is not printed (its tool calls and results are)."""
        if self._inner is not None:
            self._inner.delta(session_id, op_id, delta, so_far)

    def committed(self, event: Committed) -> None:
        """Passed on; a child turn's settled tool calls and results are printed."""
        if self._inner is not None:
            self._inner.committed(event)
        if not event.session_id.startswith(CHILD_SESSION_PREFIX):
            return
        agents = self._chain(event.session_id)
        for entry in event.entries:
            for line in _lines(agents, entry):
                self._notice(line)

    def drain(self) -> None:
        """Passed on."""
        if self._inner is not None:
            self._inner.drain()

    def _chain(self, session_id: str) -> list[str]:
        """The sub-agents the child session runs under, outermost first (one read each)."""
        if session_id not in self._agents:
            link = load_link(self._deps, session_id)
            self._agents[session_id] = list(link.path) if link is not None else ["sub-agent"]
        return self._agents[session_id]


def _lines(agents: list[str], entry: Entry) -> list[str]:
    data = entry.data if isinstance(entry.data, dict) else {}
    message = data.get("message")
    if not isinstance(message, dict):
        return []
    role, parts = message.get("role"), message.get("parts")
    lines: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if role == "assistant" and part.get("kind") == "tool_call":
            lines.append(
                nested_call_line(agents, str(part.get("name")), str(part.get("arguments", "")))
            )
        elif role == "tool" and part.get("kind") == "tool_result":
            content = part.get("content")
            lines.append(
                nested_result_line(
                    agents,
                    str(part.get("name")),
                    content if isinstance(content, str) else str(content),
                    bool(part.get("is_error", False)),
                )
            )
    return lines
