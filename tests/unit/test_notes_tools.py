"""The working-notes tools: texts, cap, clear, honesty on failure, binding, secret rejection."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import ValidationError

from turnkeep.envelope import (
    EnvelopeConflictError,
    EnvelopeStore,
    EnvelopeUnavailableError,
    MemoryEnvelopeStore,
)
from turnkeep.envelope.memory import MemoryEnvelopeState
from turnkeep.notes import (
    CLEAR_TOOL,
    GET_TOOL,
    SECRET_KINDS,
    UPDATE_TOOL,
    WORKING_NOTES_CLEARED_TEXT,
    WORKING_NOTES_EMPTY_TEXT,
    find_secret,
    updated_text,
    working_notes_tools,
)
from turnkeep.tools.base import Tool, ToolContext, ToolResult

CTX = ToolContext(session_id="s1", user_id="alice", operation_id="op-1", call_id="call-1")


class Tools:
    """The three tools of one binding, callable by name with raw JSON-ish arguments."""

    def __init__(self, store: EnvelopeStore, user_id: str = "alice", session_id: str = "s1"):
        self.by_name: dict[str, Tool[Any]] = {
            t.name: t for t in working_notes_tools(store, user_id, session_id)
        }

    def call(self, name: str, args: Mapping[str, object] | None = None) -> ToolResult:
        tool = self.by_name[name]
        return tool.run(tool.args_model.model_validate(args or {}), CTX)

    def get(self) -> ToolResult:
        return self.call(GET_TOOL)

    def update(self, notes: str) -> ToolResult:
        return self.call(UPDATE_TOOL, {"notes": notes})

    def clear(self) -> ToolResult:
        return self.call(CLEAR_TOOL)


@pytest.fixture
def store() -> MemoryEnvelopeStore:
    """A private memory store holding session s1 of alice."""
    store = MemoryEnvelopeStore(MemoryEnvelopeState())
    store.create("s1", "alice", {"title": "t"})
    return store


@pytest.fixture
def tools(store: MemoryEnvelopeStore) -> Tools:
    """The tools bound to (alice, s1)."""
    return Tools(store)


def _notes(store: EnvelopeStore, session_id: str = "s1") -> object:
    envelope = store.get(session_id)
    assert envelope is not None
    return envelope.meta.get("workingNotes")


def test_the_three_tools_are_replay_safe_and_take_no_ids(tools: Tools) -> None:
    assert set(tools.by_name) == {GET_TOOL, UPDATE_TOOL, CLEAR_TOOL}
    for tool in tools.by_name.values():
        assert tool.replay_safe
        schema = tool.spec().input_schema
        properties = set(schema.get("properties", {}))
        assert not properties & {"session_id", "sessionId", "user_id", "userId"}
    assert set(tools.by_name[UPDATE_TOOL].spec().input_schema["properties"]) == {"notes"}
    assert tools.by_name[GET_TOOL].spec().input_schema.get("properties", {}) == {}


def test_update_description_forbids_secrets_and_states_the_cap(tools: Tools) -> None:
    description = tools.by_name[UPDATE_TOOL].description
    assert "Never write secrets" in description
    assert "32768" in description


def test_get_on_a_new_session_says_empty(tools: Tools) -> None:
    assert tools.get() == ToolResult(WORKING_NOTES_EMPTY_TEXT)
    assert WORKING_NOTES_EMPTY_TEXT == "(empty — no working notes for this session)"


def test_update_trims_persists_and_reports_the_byte_count(
    tools: Tools, store: MemoryEnvelopeStore
) -> None:
    result = tools.update("\n  décision: use SQLite locally  \n")
    stored = "décision: use SQLite locally"
    assert result == ToolResult(updated_text(len(stored.encode())))
    assert result.content == (
        "working notes updated (29 bytes) — this block is folded into every future turn of "
        "this session."
    )
    assert _notes(store) == stored
    assert tools.get() == ToolResult(stored)


def test_update_replaces_the_whole_block(tools: Tools, store: MemoryEnvelopeStore) -> None:
    tools.update("first")
    tools.update("second")
    assert _notes(store) == "second"


def test_update_of_exactly_the_cap_is_accepted(tools: Tools, store: MemoryEnvelopeStore) -> None:
    result = tools.update("a" * 32768)
    assert not result.is_error
    assert "(32768 bytes)" in result.content
    assert _notes(store) == "a" * 32768


@pytest.mark.parametrize(
    ("notes", "size"),
    [
        ("a" * 32769, 32769),
        ("é" * 16384 + "a", 32769),  # 16385 characters, 32769 bytes
        ("€" * 10923, 32769),
    ],
)
def test_update_over_the_cap_is_rejected_naming_the_cap_and_keeps_the_old_notes(
    tools: Tools, store: MemoryEnvelopeStore, notes: str, size: int
) -> None:
    tools.update("keep me")
    result = tools.update(notes)
    assert result.is_error
    assert f"{size} bytes" in result.content
    assert "cap is 32768 bytes" in result.content
    assert "unchanged" in result.content
    assert _notes(store) == "keep me"  # never truncated, never replaced


def test_over_cap_error_uses_the_seed_wording(tools: Tools) -> None:
    result = tools.update("a" * 32769)
    assert result.is_error
    assert result.content.startswith(
        "working_notes_update rejected: notes exceed the 32 KiB cap (32769 bytes of UTF-8 "
        "after trimming; the cap is 32768 bytes)."
    )
    assert "never truncated" in result.content or "nothing was truncated" in result.content


def test_multibyte_notes_at_the_cap_in_bytes_are_accepted(tools: Tools) -> None:
    assert not tools.update("é" * 16384).is_error


@pytest.mark.parametrize("empty", ["", "   \n "])
def test_update_with_empty_text_clears(
    tools: Tools, store: MemoryEnvelopeStore, empty: str
) -> None:
    tools.update("something")
    assert tools.update(empty) == ToolResult(WORKING_NOTES_CLEARED_TEXT)
    assert _notes(store) is None
    assert tools.get() == ToolResult(WORKING_NOTES_EMPTY_TEXT)


def test_clear_removes_the_notes_and_leaves_other_meta(
    tools: Tools, store: MemoryEnvelopeStore
) -> None:
    tools.update("something")
    store.update_worker_meta("s1", {"turnStatus": "running"})
    assert tools.clear() == ToolResult(
        "working notes cleared — this is a new mind for this session."
    )
    envelope = store.get("s1")
    assert envelope is not None
    assert envelope.meta == {"title": "t", "turnStatus": "running"}


def test_clear_on_empty_notes_is_fine(tools: Tools) -> None:
    assert tools.clear() == ToolResult(WORKING_NOTES_CLEARED_TEXT)


def test_get_reads_poison_notes_as_empty(tools: Tools, store: MemoryEnvelopeStore) -> None:
    store.poke_raw("s1", "workingNotes", {"not": "text"})
    assert tools.get() == ToolResult(WORKING_NOTES_EMPTY_TEXT)
    store.poke_raw("s1", "workingNotes", "x" * 40000)
    assert tools.get() == ToolResult(WORKING_NOTES_EMPTY_TEXT)


def test_update_rejects_non_text_arguments_at_validation(tools: Tools) -> None:
    with pytest.raises(ValidationError):
        tools.call(UPDATE_TOOL, {"notes": 5})
    with pytest.raises(ValidationError):
        tools.call(UPDATE_TOOL, {"notes": "x", "session_id": "s2"})


# -- binding -------------------------------------------------------------------------------------


def test_tools_are_bound_to_their_session(store: MemoryEnvelopeStore) -> None:
    store.create("s2", "alice")
    Tools(store, session_id="s1").update("notes of s1")
    other = Tools(store, session_id="s2")
    assert other.get() == ToolResult(WORKING_NOTES_EMPTY_TEXT)
    other.update("notes of s2")
    assert _notes(store, "s1") == "notes of s1"
    assert _notes(store, "s2") == "notes of s2"


def test_tools_bound_to_another_users_session_neither_read_nor_write(
    store: MemoryEnvelopeStore,
) -> None:
    Tools(store).update("alice's secret plan")
    mallory = Tools(store, user_id="mallory")
    read = mallory.get()
    assert read.is_error
    assert "alice" not in read.content
    assert "plan" not in read.content
    wrote = mallory.update("overwritten")
    assert wrote.is_error
    assert "NOT updated" in wrote.content
    assert mallory.clear().is_error
    assert _notes(store) == "alice's secret plan"


# -- honesty on failure --------------------------------------------------------------------------


class BrokenStore(MemoryEnvelopeStore):
    """A store whose reads and/or writes fail with `error`."""

    def __init__(self, error: Exception, *, reads: bool, writes: bool) -> None:
        super().__init__(MemoryEnvelopeState())
        self.error, self.fail_reads, self.fail_writes = error, False, False
        self.create("s1", "alice")
        self.update_worker_meta("s1", {"workingNotes": "old notes"})
        self.fail_reads, self.fail_writes = reads, writes

    def _load(self, session_id: str) -> Any:
        if self.fail_reads:
            raise self.error
        return super()._load(session_id)

    def _update_worker(self, *args: Any, **kwargs: Any) -> Any:
        if self.fail_writes:
            raise self.error
        return super()._update_worker(*args, **kwargs)


@pytest.mark.parametrize(
    "error",
    [EnvelopeUnavailableError("DynamoDB UpdateItem failed"), EnvelopeConflictError("won twice")],
)
def test_update_and_clear_never_claim_a_save_that_failed(error: Exception) -> None:
    store = BrokenStore(error, reads=False, writes=True)
    tools = Tools(store)
    for result in (tools.update("new notes"), tools.clear()):
        assert result.is_error
        assert "persistence unavailable" in result.content
        assert "NOT" in result.content
        assert "updated (" not in result.content
        assert "new mind" not in result.content
    store.fail_writes = False
    assert _notes(store) == "old notes"


def test_conflict_failure_says_concurrent_writes_won() -> None:
    result = Tools(BrokenStore(EnvelopeConflictError("x"), reads=False, writes=True)).update("n")
    assert "concurrent" in result.content


def test_get_when_the_store_is_down_is_honest_not_empty() -> None:
    result = Tools(BrokenStore(EnvelopeUnavailableError("down"), reads=True, writes=False)).get()
    assert result.is_error
    assert "unavailable" in result.content
    assert "not necessarily empty" in result.content
    assert result.content != WORKING_NOTES_EMPTY_TEXT


def test_notes_on_a_deleted_session_are_reported_not_invented(
    tools: Tools, store: MemoryEnvelopeStore
) -> None:
    store.delete("s1")
    assert tools.get().is_error
    assert tools.update("x").is_error
    assert store.get("s1") is None  # the tool never recreates the envelope


# -- secrets -------------------------------------------------------------------------------------

SECRETS = {
    "an AWS access key id": "AKIAIOSFODNN7EXAMPLE",
    "an AWS secret access key": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "a private key block": "-----BEGIN RSA PRIVATE KEY-----\nMIIEow...",
    "a bearer token": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9abcdefghij",
    "a GitHub token": "ghp_" + "a1B2" * 9,
    "an OpenAI-style API key": "sk-proj-" + "Ab3" * 10,
    "a Stripe secret key": "sk_live_" + "x9" * 12,
    "a Slack token": "xoxb-123456789012-abcdefABCDEF",
    "a Slack webhook URL": "https://hooks.slack.com/services/T0123ABCD/B0456EFGH/" + "aB3" * 8,
    "a Google API key": "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "a password assignment": "db password: hunter2-correct-horse",
    "a JSON Web Token": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r"
    ),
}


def test_every_documented_secret_kind_has_a_sample() -> None:
    assert set(SECRETS) == set(SECRET_KINDS)


@pytest.mark.parametrize(("kind", "secret"), SECRETS.items())
def test_update_containing_a_secret_is_rejected_naming_the_kind_without_echoing_it(
    tools: Tools, store: MemoryEnvelopeStore, kind: str, secret: str
) -> None:
    tools.update("safe notes")
    result = tools.update(f"deploy notes:\n{secret}\nremember to rotate")
    assert result.is_error
    assert kind in result.content
    assert "Never write secrets" in result.content
    assert secret not in result.content
    assert secret[:12] not in result.content
    assert _notes(store) == "safe notes"


@pytest.mark.parametrize(
    "prose",
    [
        "Rotate the bearer token before Friday; the AWS access key lives in Secrets Manager.",
        "Private keys must never be pasted here. Use sk- prefixed keys only via env vars.",
        "task-1234567890abcdefghijklmnop is the ticket id",
        "We use sk-learn-compatible-estimators-wrapper for the model.",
        "Send a Bearer authorisation-header-style-value in requests.",
        "Decision: use AKIA-style ids in docs only as AKIAEXAMPLE.",
    ],
)
def test_prose_about_secrets_is_not_mistaken_for_one(prose: str) -> None:
    assert find_secret(prose) is None


def test_secret_rejection_result_is_json_safe(tools: Tools) -> None:
    result = tools.update("AKIAIOSFODNN7EXAMPLE")
    assert json.loads(json.dumps(result.content)) == result.content
