"""Which event each stored entry type shows as: one explicit table, no registration by import.

A new event kind: add the kind to `Event.kind`, write its builder, and list its entry type in
`ENTRY_EVENTS` below; entry types not listed are shown as messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from turnkeep.events.entries import approval_event, message_event, source_notice_event
from turnkeep.events.models import Event
from turnkeep.harness.approvals import APPROVAL_DECIDED, APPROVAL_REQUESTED
from turnkeep.harness.source_notices import TOOL_SOURCE_UNAVAILABLE
from turnkeep.storage import Entry

EntryEventBuilder = Callable[[Entry], Event]
"""Builds the event of one stored entry type (its `seq` must be the entry's)."""


class EventRegistry:
    """Entry type -> its event builder; any other type is a message event."""

    def __init__(self, builders: Mapping[str, EntryEventBuilder]) -> None:
        self.builders: Mapping[str, EntryEventBuilder] = MappingProxyType(dict(builders))

    def event(self, entry: Entry) -> Event:
        """A settled entry as an event (keeping its `seq`, so pages stay in causal order)."""
        return self.builders.get(entry.type, message_event)(entry)


ENTRY_EVENTS = EventRegistry(
    {
        APPROVAL_REQUESTED: approval_event,
        APPROVAL_DECIDED: approval_event,
        TOOL_SOURCE_UNAVAILABLE: source_notice_event,
    }
)
"""Every entry type with an event kind of its own (docs/api.md, "Events")."""


def entry_event(entry: Entry) -> Event:
    """A settled entry as the events page and the WebSocket show it (`ENTRY_EVENTS`)."""
    return ENTRY_EVENTS.event(entry)
