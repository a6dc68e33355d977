"""The compaction prompt: how the harness asks a model to summarize the older part of a session,
and how that summary is shown to the model in later rounds (docs/harness.md, "Context budget").

Kept with the providers (it is what a provider is asked) so the scripted model can recognize a
compaction request without importing the harness.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from turnkeep.providers.base import Message, TextPart, ToolCallPart, ToolResultPart

COMPACTION_HEADING: Final = "You are compacting a conversation."
COMPACTION_SYSTEM_PROMPT: Final = (
    f"{COMPACTION_HEADING}\n"
    "The user message holds the summary written at the previous compaction (if any) and the "
    "older part of a conversation between a user and an assistant that used tools. Write one "
    "summary that replaces both: the user's goals and requests, decisions and facts "
    "established, tool results that still matter, and open questions. Plain text, no preamble, "
    "at most a few hundred words. Do not continue the conversation."
)
PREVIOUS_SUMMARY_LABEL: Final = "Previous summary:"
CONVERSATION_LABEL: Final = "Conversation to summarize:"
SUMMARY_MESSAGE_HEADING: Final = "[Summary of the earlier conversation (compacted)]"


def is_compaction_request(system: str) -> bool:
    """Whether a request's system prompt is the compaction prompt."""
    return system.startswith(COMPACTION_HEADING)


def message_lines(messages: Iterable[Message]) -> list[str]:
    """One line per part: `[user] …`, `[assistant] …`, `[tool call NAME] ARGS`, `[tool NAME] …`."""
    lines: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                if part.text.strip():
                    lines.append(f"[{message.role}] {part.text}")
            elif isinstance(part, ToolCallPart):
                lines.append(f"[tool call {part.name}] {part.arguments}")
            elif isinstance(part, ToolResultPart):
                status = " error" if part.is_error else ""
                lines.append(f"[tool {part.name}{status}] {part.content}")
    return lines


def compaction_input(
    previous_summary: str | None, messages: Iterable[Message], max_chars: int
) -> str:
    """The user message of a compaction request, at most about `max_chars` characters.

    When the older part is longer, its oldest lines are left out with a visible marker naming
    how many characters were left out (the previous summary is always kept whole).
    """
    head = f"{PREVIOUS_SUMMARY_LABEL}\n{previous_summary}\n\n" if previous_summary else ""
    lines = message_lines(messages)
    room = max(0, max_chars - len(head) - len(CONVERSATION_LABEL) - 80)
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > room:
            break
        kept.append(line)
        used += len(line) + 1
    kept.reverse()
    omitted = sum(len(line) + 1 for line in lines[: len(lines) - len(kept)])
    body = "\n".join(kept)
    if omitted:
        body = f"[… {omitted} earlier characters of the conversation left out …]\n{body}"
    return f"{head}{CONVERSATION_LABEL}\n{body}"


def summary_message(summary: str) -> Message:
    """The user message that carries a compaction summary at the start of the model's view."""
    return Message("user", (TextPart(f"{SUMMARY_MESSAGE_HEADING}\n{summary}"),))
