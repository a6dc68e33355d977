"""Conformance: a long tool result kept whole (turnkeep.harness.tool_results) fits every
backend's per-value and per-transaction limits — also text whose JSON is at its largest
(control characters, astral emoji) — and `read_tool_result` reads it back page by page."""

from __future__ import annotations

import re

from tests.conformance.backends import BackendHarness
from turnkeep.harness.tool_results import CHUNK_CHARS, ReadArgs, read_tool_result_tool, size_result
from turnkeep.tools.context import ToolContext

NEXT = re.compile(r'"offset": (\d+)\}')
PAGE = 40_000


def test_a_long_result_is_stored_whole_and_read_back_page_by_page(backend: BackendHarness) -> None:
    # \x01 is 6 bytes of JSON (\u0001), an emoji 4 of UTF-8: the largest a character gets.
    whole = ("\x01" * (CHUNK_CHARS // 2) + "🥫" * (CHUNK_CHARS // 2)) * 4 + "end"
    sized = size_result(whole, "call-big", PAGE, 1_048_576)
    storage = backend.open("pantry")
    storage.commit(sized.writes)
    tool = read_tool_result_tool(backend.open, "pantry")
    ctx = ToolContext("pantry", "u", "op", "c")

    read, offset = whole[:PAGE], PAGE
    while True:
        page = tool.run(ReadArgs(call_id="call-big", offset=offset), ctx)
        assert not page.is_error, page.content[-200:]
        text, _, marker = page.content.rpartition("\n[characters ")
        read += text
        found = NEXT.search(marker)
        if found is None:
            break
        offset = int(found.group(1))

    assert sized.content.startswith(whole[:PAGE] + "\n[tool result truncated: ")
    assert read == whole
