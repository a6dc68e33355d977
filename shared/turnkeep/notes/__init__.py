"""Agent-authored working notes: the bound tools, the sanitizer and the secret check."""

from __future__ import annotations

from turnkeep.envelope.keys import sanitize_working_notes
from turnkeep.notes.secrets import SECRET_KINDS, find_secret
from turnkeep.notes.tools import (
    CLEAR_TOOL,
    GET_TOOL,
    UPDATE_TOOL,
    WORKING_NOTES_CLEARED_TEXT,
    WORKING_NOTES_EMPTY_TEXT,
    WORKING_NOTES_TOOL_NAMES,
    updated_text,
    working_notes_tools,
)

__all__ = [
    "CLEAR_TOOL",
    "GET_TOOL",
    "SECRET_KINDS",
    "UPDATE_TOOL",
    "WORKING_NOTES_CLEARED_TEXT",
    "WORKING_NOTES_EMPTY_TEXT",
    "WORKING_NOTES_TOOL_NAMES",
    "find_secret",
    "sanitize_working_notes",
    "updated_text",
    "working_notes_tools",
]
