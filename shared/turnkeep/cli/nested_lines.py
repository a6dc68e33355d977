"""How both chats print a sub-agent's child turn as it runs: one line per child tool call and
per result, indented under the call, named by the sub-agents it runs under (docs/agent.md,
"Sub-agents")."""

from __future__ import annotations

from collections.abc import Sequence

PREVIEW_CHARS = 160
"""A nested result's line shows its first line up to this many characters (the full result
is the child's, in its own session)."""


def _head(agents: Sequence[str]) -> str:
    # One step deeper than the chat's own tool lines (`  -> tool call ...`) per sub-agent.
    return "  " * (len(agents) + 1) + f"[{' > '.join(agents)}]"


def nested_call_line(agents: Sequence[str], name: str, arguments: str) -> str:
    """`    [writer] call wait_for_go {}`."""
    return f"{_head(agents)} call {name} {arguments}"


def nested_result_line(agents: Sequence[str], name: str, content: str, is_error: bool) -> str:
    """`    [writer] wait_for_go returned: went` (an error says so)."""
    first = content.splitlines()[0] if content else ""
    shown = (
        first if len(first) <= PREVIEW_CHARS and first == content else first[:PREVIEW_CHARS] + " …"
    )
    verb = "failed" if is_error else "returned"
    return f"{_head(agents)} {name} {verb}: {shown}"
