"""The event views: a turn's status and events, transcript pages, each stored entry as an
event (`ENTRY_EVENTS`, an explicit table). Below both the HTTP API (`turnkeep.api`) and the
WebSocket API (`turnkeep.live`): neither borrows the other's read models."""

from turnkeep.events.entries import (
    approval_event,
    frame_event,
    message_event,
    source_notice_event,
)
from turnkeep.events.models import (
    CURSOR_MAX,
    Delta,
    Event,
    EventsPage,
    NestedCall,
    TranscriptPage,
    TurnStatus,
    TurnView,
)
from turnkeep.events.nested import (
    CURSOR_PATTERN,
    CursorError,
    MergedPage,
    OpenChild,
    TurnCursor,
    nested_turn_events,
)
from turnkeep.events.registry import ENTRY_EVENTS, EntryEventBuilder, EventRegistry, entry_event
from turnkeep.events.timeline import TimelineBar, TurnTimeline, turn_timeline
from turnkeep.events.turns import (
    TurnNotFound,
    transcript_page,
    turn_events,
    turn_values,
    turn_view,
)

__all__ = [
    "CURSOR_MAX",
    "CURSOR_PATTERN",
    "ENTRY_EVENTS",
    "CursorError",
    "Delta",
    "EntryEventBuilder",
    "Event",
    "EventRegistry",
    "EventsPage",
    "MergedPage",
    "NestedCall",
    "OpenChild",
    "TimelineBar",
    "TranscriptPage",
    "TurnCursor",
    "TurnNotFound",
    "TurnStatus",
    "TurnTimeline",
    "TurnView",
    "approval_event",
    "entry_event",
    "frame_event",
    "message_event",
    "nested_turn_events",
    "source_notice_event",
    "transcript_page",
    "turn_events",
    "turn_timeline",
    "turn_values",
    "turn_view",
]
