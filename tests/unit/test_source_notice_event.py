"""The `tool_source_unavailable` entry is one event kind for every reader: the events page and
the event stream (`entry_event`) and the WebSocket push (`event_messages`) show it with its
source, message and the tools left out."""

from __future__ import annotations

import json

from turnkeep.events import entry_event
from turnkeep.harness.live import Committed
from turnkeep.harness.source_notices import TOOL_SOURCE_UNAVAILABLE, notice_entry_id
from turnkeep.live.push import event_messages
from turnkeep.storage import Entry

NOTICE = Entry(
    id=notice_entry_id("op-1", "grocer"),
    parent_id="op-1:user",
    type=TOOL_SOURCE_UNAVAILABLE,
    data={
        "op": "op-1",
        "round": 0,
        "source": "grocer",
        "message": "tool source 'grocer': its tool 'grocer_price' clashes with ...",
        "tools": ["grocer_price"],
    },
    seq=7,
)


def test_a_notice_entry_is_a_tool_source_unavailable_event_of_the_turn() -> None:
    event = entry_event(NOTICE)

    assert event.kind == "tool_source_unavailable"
    assert (event.seq, event.round, event.source, event.tools) == (7, 0, "grocer", ["grocer_price"])
    assert event.message == "tool source 'grocer': its tool 'grocer_price' clashes with ..."
    assert event.role is None  # not a transcript message


def test_the_websocket_push_sends_it_under_its_own_kind_with_its_seq() -> None:
    ((seq, body),) = event_messages(Committed("s-1", "op-1", entries=(NOTICE,)))

    message = json.loads(body)
    assert seq == 7
    assert message["event"] == "tool_source_unavailable"
    assert message["id"] == 7
    assert message["data"]["source"] == "grocer"
    assert message["data"]["tools"] == ["grocer_price"]
