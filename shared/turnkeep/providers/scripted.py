"""`scripted`: a deterministic offline model that really calls tools through the tool-call path.

Behaviour (other code and tests rely on it). The command is the last user message, trimmed
(its last text part, when the model view merged user messages of turns that got no reply):

- ``remember <text>`` → one ``working_notes_update`` call whose ``notes`` are the current notes
  (read from the working-notes block of the system prompt) plus ``<text>`` on a new line; after
  the result: ``Noted.`` (or the tool's error text quoted).
- ``what do you remember?`` → one ``working_notes_get`` call; after the result a reply that
  contains the result text verbatim, or says there are no notes when the result is empty.
- ``forget everything`` → one ``working_notes_clear`` call; after the result: ``Forgotten.``
- ``call <tool> <json args>`` → that tool call with exactly those argument text; after the
  result a reply quoting it (``Tool <name> returned: <result>``, for every tool, the notes
  tools included). Several ``call`` lines in one message are parallel calls of one round; a
  line ``then`` starts the next round (multi-round scripts).
- anything else → ``You said: <message>``.

With tools off (an empty tool list: the wrap-up round) it never calls a tool and answers
``Wrapping up: ...``. Replies stream in several text frames; tool-call arguments stream in two
pieces; the final response carries usage (characters / 4) and the stop reason.

Context: a request whose input tokens (characters / 4 of the system prompt and messages) plus
the output reserve exceed the context window (`scripted?context=N&reserve=N`) fails with
``FatalModelError(code="context_length")``, as a real provider's does. A compaction request
(system prompt = `turnkeep.providers.compaction.COMPACTION_SYSTEM_PROMPT`) is answered with a
deterministic summary: ``Earlier conversation: N user messages. First: '…'. Latest: '…'.``
(N and the first message carry over from the previous summary; quotes are cut at 80
characters).

Tool-call ids are ``call_u{n}_r{round}_{i}``: n is the number of the user message in the
request, raised above any n already used in the request, so ids stay unique when older turns
were left out of the request.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

from turnkeep.providers.base import (
    FatalModelError,
    Message,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StopReason,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolCallStart,
    ToolResultPart,
    Usage,
)
from turnkeep.providers.compaction import (
    CONVERSATION_LABEL,
    PREVIOUS_SUMMARY_LABEL,
    is_compaction_request,
)
from turnkeep.providers.context import SCRIPTED_CONTEXT, ContextWindow
from turnkeep.providers.settings import ModelSettings
from turnkeep.system_prompt import (
    WORKING_NOTES_CLOSE,
    WORKING_NOTES_EMPTY_TEXT,
    WORKING_NOTES_HEADING,
    WORKING_NOTES_OPEN,
)


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """A tool call the script makes: tool name and raw JSON argument text."""

    name: str
    arguments: str


def notes_from_system(system: str) -> str:
    """The notes text folded into `system` ('' when the prompt has no working-notes block).

    The fold (`turnkeep.system_prompt.resolve_system`) puts the notes verbatim between tagged
    ``--- begin working notes <tag> ---`` / ``--- end working notes <tag> ---`` lines after the
    heading; only the end line with the begin line's tag closes the block.
    """
    start = system.find(WORKING_NOTES_HEADING)
    if start < 0:
        return ""
    opened = _NOTES_OPEN.search(system, start)
    if opened is None:
        return ""
    close = "\n" + WORKING_NOTES_CLOSE.format(tag=opened.group("tag"))
    end = system.find(close, opened.end())
    return system[opened.end() : end if end >= 0 else len(system)]


_NOTES_OPEN = re.compile(
    re.escape(WORKING_NOTES_OPEN).replace(re.escape("{tag}"), "(?P<tag>[0-9a-f]{12})") + "\n"
)


def plan_rounds(text: str, current_notes: str) -> list[list[PlannedCall]] | None:
    """The tool rounds the script makes for a user message, or None for a plain reply."""
    command = text.strip()
    lowered = command.lower()
    if lowered.startswith("remember ") or lowered == "remember":
        addition = command[len("remember") :].strip()
        notes = f"{current_notes}\n{addition}" if current_notes else addition
        return [[PlannedCall("working_notes_update", json.dumps({"notes": notes}))]]
    if lowered.rstrip("?!. ") == "what do you remember":
        return [[PlannedCall("working_notes_get", "{}")]]
    if lowered.rstrip("!. ") == "forget everything":
        return [[PlannedCall("working_notes_clear", "{}")]]
    if lowered.startswith("call "):
        rounds: list[list[PlannedCall]] = [[]]
        for raw_line in command.splitlines():
            line = raw_line.strip()
            if not line:
                continue
            if line.lower() == "then":
                rounds.append([])
                continue
            if not line.lower().startswith("call "):
                return None
            _, _, rest = line.partition(" ")
            name, _, arguments = rest.strip().partition(" ")
            rounds[-1].append(PlannedCall(name, arguments.strip() or "{}"))
        return [r for r in rounds if r]
    return None


class ScriptedProvider(ModelProvider):
    """Deterministic offline model; see the module docstring for its documented behaviour."""

    name = "scripted"

    def __init__(
        self,
        *,
        words_per_frame: int = 2,
        frame_delay: float = 0.0,
        context: ContextWindow = SCRIPTED_CONTEXT,
    ) -> None:
        if words_per_frame < 1:
            raise ValueError(f"words_per_frame must be >= 1, got {words_per_frame}")
        self.words_per_frame = words_per_frame
        self.frame_delay = frame_delay
        self.context = context
        self.settings = ModelSettings()
        """Only `price` is read (the `price=` spec option; docs/usage.md)."""

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Stream the scripted answer to the request's last user message."""
        input_tokens = input_token_count(request)
        if input_tokens + self.context.output_reserve > self.context.tokens:
            raise FatalModelError(
                f"scripted: the prompt is too long: {input_tokens} input tokens + "
                f"{self.context.output_reserve} reserved for output exceed the context window "
                f"of {self.context.tokens} tokens",
                code="context_length",
            )
        stop: StopReason
        if is_compaction_request(request.system):
            message, stop = _reply(_summary(request)), "end_turn"
        else:
            message, stop = self._answer(request)
        yield from self._stream_message(message)
        usage = Usage(input_tokens=input_tokens, output_tokens=_tokens(_message_text(message)))
        yield ResponseDone(ModelResponse(message, stop, usage, model="scripted"))

    # -- script -----------------------------------------------------------------------------

    def _answer(self, request: ModelRequest) -> tuple[Message, StopReason]:
        user_index = max(
            (i for i, m in enumerate(request.messages) if m.role == "user"), default=-1
        )
        if user_index < 0:
            return _reply("Hello. Send me a message."), "end_turn"
        # The last text part: the model view merges consecutive user messages (a turn that
        # ended before any reply), and the command is the newest of them.
        texts = [p.text for p in request.messages[user_index].parts if isinstance(p, TextPart)]
        user_text = texts[-1] if texts else ""
        after = request.messages[user_index + 1 :]
        calls_made = [m for m in after if m.role == "assistant" and m.tool_calls]
        results: list[ToolResultPart] = [
            p for m in after if m.role == "tool" for p in m.parts if isinstance(p, ToolResultPart)
        ]
        notes = notes_from_system(request.system)
        rounds = plan_rounds(user_text, notes)
        if rounds is None:
            return _reply(f"You said: {user_text}"), "end_turn"
        next_round = len(calls_made)
        if next_round < len(rounds):
            if not request.tools:
                return _reply(f"Wrapping up: tools are off, so I stop here. {_quote(results)}"), (
                    "end_turn"
                )
            user_number = _user_number(request.messages, user_index)
            parts = tuple(
                ToolCallPart(f"call_u{user_number}_r{next_round}_{i}", c.name, c.arguments)
                for i, c in enumerate(rounds[next_round])
            )
            return Message("assistant", parts), "tool_use"
        return _reply(_after_tools(user_text, rounds, results)), "end_turn"

    def _stream_message(self, message: Message) -> Iterator[StreamEvent]:
        index = 0
        for part in message.parts:
            if isinstance(part, TextPart):
                for piece in _pieces(part.text, self.words_per_frame):
                    self._pause()
                    yield TextDelta(piece)
            elif isinstance(part, ToolCallPart):
                self._pause()
                yield ToolCallStart(index, part.id, part.name)
                half = len(part.arguments) // 2
                for piece in (part.arguments[:half], part.arguments[half:]):
                    if piece:
                        yield ToolCallDelta(index, piece)
                index += 1

    def _pause(self) -> None:
        if self.frame_delay > 0:
            time.sleep(self.frame_delay)


_CALL_ID = re.compile(r"^call_u(\d+)_r\d+_\d+$")


def _user_number(messages: tuple[Message, ...], user_index: int) -> int:
    """The number of the current user message, above every number earlier calls used."""
    number = sum(1 for m in messages[: user_index + 1] if m.role == "user")
    for message in messages[:user_index]:
        for call in message.tool_calls:
            matched = _CALL_ID.match(call.id)
            if matched is not None:
                number = max(number, int(matched.group(1)) + 1)
    return number


_EARLIER = re.compile(r"^Earlier conversation: (\d+) user messages\. First: (.*?)\. Latest: ", re.M)


def _summary(request: ModelRequest) -> str:
    """The deterministic summary of a compaction request (see the module docstring)."""
    text = request.messages[-1].text if request.messages else ""
    previous, _, conversation = text.partition(CONVERSATION_LABEL)
    users = [
        line[len("[user] ") :][:80]
        for line in conversation.splitlines()
        if line.startswith("[user] ")
    ]
    count, first = len(users), repr(users[0] if users else "")
    found = _EARLIER.search(previous) if previous.startswith(PREVIOUS_SUMMARY_LABEL) else None
    if found is not None:  # the first message of the whole conversation stays the first
        count, first = count + int(found.group(1)), found.group(2)
    return (
        f"Earlier conversation: {count} user messages. "
        f"First: {first}. Latest: {(users[-1] if users else '')!r}."
    )


def input_token_count(request: ModelRequest) -> int:
    """What the scripted model reports as input tokens: characters / 4 of system and messages."""
    return _tokens(request.system) + sum(_tokens(_message_text(m)) for m in request.messages)


def _after_tools(
    command: str, rounds: list[list[PlannedCall]], results: list[ToolResultPart]
) -> str:
    if command.strip().lower().startswith("call "):
        return _quote(results)  # `call <tool> …` always quotes, whichever tool it named
    # remember / what do you remember? / forget everything: one working-notes call.
    name = rounds[0][0].name
    last = results[-1] if results else None
    if last is not None and last.is_error:
        return f"I could not do that: {last.content}"
    if name == "working_notes_update":
        return "Noted."
    if name == "working_notes_clear":
        return "Forgotten."
    content = last.content if last is not None else ""
    if not content.strip() or content == WORKING_NOTES_EMPTY_TEXT:
        return "I have no working notes yet."
    return f"Here is what I remember:\n{content}"


def _quote(results: list[ToolResultPart]) -> str:
    lines = []
    for result in results:
        verb = "failed" if result.is_error else "returned"
        lines.append(f"Tool {result.name} {verb}: {result.content}")
    return "\n".join(lines)


def _reply(text: str) -> Message:
    return Message("assistant", (TextPart(text),))


def _pieces(text: str, words_per_frame: int) -> list[str]:
    """Split `text` into frames of a few words, keeping every character (spaces included)."""
    words = text.split(" ")
    pieces = []
    for start in range(0, len(words), words_per_frame):
        chunk = " ".join(words[start : start + words_per_frame])
        pieces.append(chunk if start + words_per_frame >= len(words) else chunk + " ")
    return [p for p in pieces if p]


def _message_text(message: Message) -> str:
    out = []
    for part in message.parts:
        if isinstance(part, TextPart):
            out.append(part.text)
        elif isinstance(part, ToolCallPart):
            out.append(part.name + part.arguments)
        elif isinstance(part, ToolResultPart):
            out.append(part.content)
    return "".join(out)


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4
