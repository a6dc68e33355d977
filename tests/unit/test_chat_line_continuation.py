"""`turnkeep chat` reads one message per line, and a line ending with a backslash goes on on the
next one (docs/local.md), so one message can hold a multi-round script."""

from __future__ import annotations

import io
from typing import Any, cast

from turnkeep.cli.chat import ChatBackend, repl


class _Recorded:
    """Records the messages the REPL sends as turns (the only backend call these lines make)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def turn(self, text: str) -> None:
        self.sent.append(text)


def _sent(stdin: str) -> tuple[list[str], str]:
    backend = _Recorded()
    out = io.StringIO()
    repl(io.StringIO(stdin), out, cast(ChatBackend, cast(Any, backend)))
    return backend.sent, out.getvalue()


def test_a_line_ending_with_a_backslash_continues_the_message_on_the_next_line() -> None:
    sent, out = _sent('call a {"x": 1} \\\nthen \\\ncall b {}\nsecond\n/quit\n')

    assert sent == ['call a {"x": 1}\nthen\ncall b {}', "second"]
    assert out.count("...> ") == 2


def test_a_backslash_inside_a_line_or_eof_after_a_continuation_loses_nothing() -> None:
    sent, _ = _sent("say \\n here\nlast \\\n")

    assert sent == ["say \\n here", "last"]
