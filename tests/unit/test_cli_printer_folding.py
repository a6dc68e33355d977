"""The chat printers fold a long tool result to one line with its size and the `/show N` that
prints it whole — the in-process chat and `chat --url` (the API's events through
`TurnEventRenderer`) alike; a short result keeps its one line."""

from __future__ import annotations

import io

from turnkeep.cli.event_renderer import TurnEventRenderer
from turnkeep.cli.printer import FOLD_CHARS, StreamPrinter

LONG = "\n".join(f"shelf {n:05}: rice, oats, tea, beans" for n in range(2_000))


def _tool_event(seq: int, content: str) -> dict[str, object]:
    return {
        "seq": seq,
        "kind": "entry",
        "entry_id": f"op-1:r0:c{seq}",
        "role": "tool",
        "parts": [
            {"kind": "tool_result", "name": "dump_pantry", "content": content, "is_error": False}
        ],
    }


def test_chat_url_folds_a_long_result_to_one_line_with_its_size() -> None:
    out = io.StringIO()
    printer = StreamPrinter(out)
    renderer = TurnEventRenderer(printer)
    renderer.on_event(_tool_event(3, "ok"))
    renderer.on_event(_tool_event(4, LONG))
    renderer.finish()

    assert out.getvalue() == (
        "  <- dump_pantry [ok] ok\n"
        "  <- dump_pantry [ok] shelf 00000: rice, oats, tea, beans "
        f"[folded: {len(LONG):,} characters, 2,000 lines; /show 2 prints it whole]\n"
    )
    assert printer.whole("2").endswith(f"#2, {len(LONG):,} characters:\n{LONG}")
    assert printer.whole("") == printer.whole("2")  # the latest


def test_a_long_single_line_is_cut_to_its_start_and_show_explains_a_bad_number() -> None:
    out = io.StringIO()
    printer = StreamPrinter(out)
    line = "x" * (FOLD_CHARS * 200)

    printer.tool_result("echo", line, False)

    shown = out.getvalue()
    assert shown.startswith("  <- echo [ok] " + "x" * 120 + "… [folded: 60,000 characters, 1 line;")
    assert len(shown) < 250
    assert printer.whole("7") == "/show takes a tool result's number, 1 to 1 (got '7')"
    assert StreamPrinter(io.StringIO()).whole("") == "(no tool results shown yet)"
