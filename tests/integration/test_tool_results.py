"""A long tool result does not flood the session: the model gets a preview sized to a share of
its input budget, the whole result is kept in the session's storage, `read_tool_result` pages
through it (clear errors for an unknown call id or an offset past the end), and the next turn's
context carries the preview, not the result."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.integration.turns_support import USER, Harness, make_turn_harness
from tests.support import pantry_tools as pantry
from turnkeep.harness import run_turn
from turnkeep.harness.deps import HarnessLimits
from turnkeep.harness.tool_results import preview_chars
from turnkeep.providers.base import ModelRequest, ToolResultPart
from turnkeep.providers.context import ContextWindow

DUMP = 'call dump_pantry {"kb": 200}'
NEXT = re.compile(r'read_tool_result \{"call_id": "([^"]+)", "offset": (\d+)\}')


def _results(request: ModelRequest) -> list[ToolResultPart]:
    return [p for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]


def _harness(tmp_path: Path, backend: str = "memory", **limits: object) -> Harness:
    h = make_turn_harness(tmp_path, backend, limits=HarnessLimits(frame_interval_ms=0, **limits))  # type: ignore[arg-type]
    h.deps.agent = pantry.agent
    return h


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_next_turns_context_carries_the_preview_not_the_whole_result(
    tmp_path: Path, backend: str
) -> None:
    h = _harness(tmp_path, backend)
    whole = pantry.dump_pantry.function(200)
    preview = preview_chars(h.provider.context, 0.05)

    run_turn(h.deps, h.session_id, USER, DUMP)
    run_turn(h.deps, h.session_id, USER, "thanks")

    (seen,) = _results(h.provider.requests[-1])
    assert len(whole) > 200_000 > 7 * preview
    assert seen.content.startswith(whole[:preview] + "\n[tool result truncated: showing ")
    assert f"characters 0-{preview} of {len(whole)}; the whole result is kept." in seen.content
    assert len(seen.content) < preview + 300
    request_chars = sum(
        len(p.content)
        for m in h.provider.requests[-1].messages
        for p in m.parts
        if hasattr(p, "content")
    )
    assert request_chars < preview + 2_000


def test_the_preview_is_a_share_of_the_models_input_budget(tmp_path: Path) -> None:
    small = _harness(tmp_path)
    small.provider.context = ContextWindow(8_192, 2_048)
    run_turn(small.deps, small.session_id, USER, DUMP)

    (seen,) = _results(small.provider.requests[-1])
    assert preview_chars(small.provider.context, 0.05) == 1_228
    assert "showing characters 0-1228 of " in seen.content


def test_read_tool_result_pages_through_the_whole_result(tmp_path: Path) -> None:
    h = _harness(tmp_path)
    h.provider.context = ContextWindow(32_000, 2_000)  # 6,000-character pages
    whole = pantry.dump_pantry.function(20)
    run_turn(h.deps, h.session_id, USER, 'call dump_pantry {"kb": 20}')
    (first,) = _results(h.provider.requests[-1])
    found = NEXT.search(first.content)
    assert found is not None
    call_id, offset = found.group(1), int(found.group(2))
    read = whole[:offset]

    for _ in range(10):
        args = json.dumps({"call_id": call_id, "offset": offset})
        run_turn(h.deps, h.session_id, USER, f"call read_tool_result {args}")
        page = _results(h.provider.requests[-1])[-1]
        assert not page.is_error, page.content
        text, _, marker = page.content.rpartition("\n[characters ")
        read += text
        found = NEXT.search(marker)
        if found is None:
            assert marker.endswith("this is the end of the result.]")
            break
        offset = int(found.group(2))

    assert read == whole


def test_read_tool_result_explains_an_unknown_call_id_and_an_offset_past_the_end(
    tmp_path: Path,
) -> None:
    h = _harness(tmp_path)
    run_turn(h.deps, h.session_id, USER, DUMP)
    (first,) = _results(h.provider.requests[-1])
    found = NEXT.search(first.content)
    assert found is not None

    run_turn(
        h.deps,
        h.session_id,
        USER,
        'call read_tool_result {"call_id": "nope", "offset": 0}\n'
        f'call read_tool_result {{"call_id": "{found.group(1)}", "offset": 999999}}\n'
        'call read_tool_result {"call_id": "nope", "offset": -1}',
    )

    unknown, past, negative = _results(h.provider.requests[-1])[-3:]
    assert unknown.is_error
    assert unknown.content.startswith("Error: no stored tool result for call id 'nope'")
    assert past.is_error
    assert "offset 999999 is past the end of the result" in past.content
    assert negative.is_error
    assert "offset: Input should be greater than or equal to 0" in negative.content


def test_a_result_over_the_stored_cap_is_cut_there_and_the_preview_says_so(
    tmp_path: Path,
) -> None:
    h = _harness(tmp_path, max_tool_result_bytes=100_000)
    run_turn(h.deps, h.session_id, USER, DUMP)

    (seen,) = _results(h.provider.requests[-1])
    assert "only its first 100000 bytes were kept (max_tool_result_bytes)" in seen.content
    assert "of 100000; the whole result is kept." in seen.content


def test_a_short_result_is_shown_whole_and_nothing_is_stored(tmp_path: Path) -> None:
    h = _harness(tmp_path)
    run_turn(h.deps, h.session_id, USER, 'call dump_pantry {"kb": 1}')

    (seen,) = _results(h.provider.requests[-1])
    assert seen.content == pantry.dump_pantry.function(1)
    with h.storage() as storage:
        assert storage.scan_values("tool_result") == []
