"""Reserved keys, ownership, caps arithmetic, the notes sanitizer and URL parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnkeep.envelope import (
    HOST_META_KEYS,
    KEY_SPECS,
    RESERVED_META_KEYS,
    WORKER_META_KEYS,
    Envelope,
    MetaValidationError,
    caps,
    open_envelope_store,
    sanitize_working_notes,
)
from turnkeep.envelope.keys import meta_size_bytes, sanitize_meta
from turnkeep.envelope.memory import MemoryEnvelopeStore
from turnkeep.envelope.sqlite import SqliteEnvelopeStore
from turnkeep.session_ids import SESSION_ID_MAX_LENGTH

SEED_HOST_KEYS = {
    "title",
    "personaId",
    "personaSnapshot",
    "attachedSkills",
    "selectedModel",
    "reasoningEffort",
}
SEED_WORKER_KEYS = {
    "workingNotes",
    "turnStatus",
    "turnRunId",
    "turnStreamCursor",
    "usage",
    "turnStartedAt",
    "turnError",
}


def test_host_and_worker_keys_are_disjoint_and_cover_the_seed_keys() -> None:
    assert not HOST_META_KEYS & WORKER_META_KEYS
    assert SEED_HOST_KEYS <= HOST_META_KEYS
    assert SEED_WORKER_KEYS <= WORKER_META_KEYS
    assert RESERVED_META_KEYS == HOST_META_KEYS | WORKER_META_KEYS == set(KEY_SPECS)


def test_working_notes_cap_is_32_kib() -> None:
    assert caps.WORKING_NOTES_MAX_BYTES == 32768
    assert KEY_SPECS["workingNotes"].max_bytes == 32768


def test_per_key_caps_sum_within_the_whole_meta_cap() -> None:
    # Every key at its cap, name included, must fit META_MAX_BYTES: so no mix of valid host
    # and worker writes can outgrow it, without a worker ever reading host keys.
    worst = sum(len(name) + spec.max_bytes for name, spec in KEY_SPECS.items())
    assert worst <= caps.META_MAX_BYTES


def test_whole_envelope_fits_one_dynamodb_item_with_margin() -> None:
    id_bytes = SESSION_ID_MAX_LENGTH
    owner_bytes = caps.OWNER_ID_MAX_BYTES
    number = 21  # DynamoDB stores a number in at most 21 bytes
    overhead = (
        len("pk") + len("SESSION#") + id_bytes
        + len("sk") + len("ENVELOPE")
        + len("gsi1pk") + len("OWNER#") + owner_bytes
        + len("gsi1sk") + len("SESSION#") + id_bytes
        + len("ownerId") + owner_bytes
        + len("sessionId") + id_bytes
        + len("createdAt") + number
        + len("updatedAt") + number
        + len("m_") * len(KEY_SPECS)
    )  # fmt: skip
    assert overhead <= caps.ENVELOPE_ITEM_OVERHEAD_MAX_BYTES
    largest_item = caps.META_MAX_BYTES + caps.ENVELOPE_ITEM_OVERHEAD_MAX_BYTES
    assert caps.DYNAMODB_ITEM_MAX_BYTES - largest_item >= 100 * 1024  # a quarter stays free


def test_persona_snapshot_cap_is_below_the_seeds_512_kib_so_it_fits_dynamodb() -> None:
    assert caps.PERSONA_SNAPSHOT_MAX_BYTES < caps.DYNAMODB_ITEM_MAX_BYTES
    assert caps.PERSONA_SNAPSHOT_MAX_BYTES + caps.WORKING_NOTES_MAX_BYTES < caps.META_MAX_BYTES


# -- sanitize_working_notes ----------------------------------------------------------------------


def test_sanitize_trims_and_keeps_text_within_the_cap() -> None:
    assert sanitize_working_notes("  finding: A  \n") == "finding: A"


@pytest.mark.parametrize("empty", ["", "   ", "\n\t"])
def test_sanitize_maps_empty_notes_to_none(empty: str) -> None:
    assert sanitize_working_notes(empty) is None


def test_sanitize_accepts_exactly_the_cap_and_rejects_one_byte_more() -> None:
    assert sanitize_working_notes("a" * 32768) == "a" * 32768
    assert sanitize_working_notes("a" * 32769) is None


def test_sanitize_counts_utf8_bytes_not_characters() -> None:
    two_byte = "é" * 16384  # 32768 bytes, 16384 characters
    assert sanitize_working_notes(two_byte) == two_byte
    assert sanitize_working_notes(two_byte + "a") is None
    assert sanitize_working_notes("€" * 10923) is None  # 32769 bytes in 10923 characters
    assert sanitize_working_notes("€" * 10922 + "ab") is not None  # 32768 bytes


def test_sanitize_measures_after_trimming() -> None:
    assert sanitize_working_notes("  " + "a" * 32768 + "  ") == "a" * 32768


@pytest.mark.parametrize("poison", [None, 5, 1.5, True, ["a"], {"a": "b"}, b"bytes", "\ud800x"])
def test_sanitize_maps_poison_to_none(poison: object) -> None:
    assert sanitize_working_notes(poison) is None


# -- read-back and size helpers ------------------------------------------------------------------


def test_sanitize_meta_drops_unknown_keys_and_poison_and_keeps_the_rest() -> None:
    raw = {
        "title": "ok",
        "archived": 1,
        "turnStepCount": 3,
        "usage": "{}",
        "turnStatus": None,
        "future": "x",
        7: "not a str key",
    }
    assert sanitize_meta(raw) == {"title": "ok", "turnStepCount": 3, "usage": "{}"}  # type: ignore[arg-type]


def test_meta_size_counts_names_and_utf8_values() -> None:
    assert meta_size_bytes({"title": "é", "archived": True, "turnStepCount": 12}) == (
        5 + 2 + 8 + 4 + 13 + 2
    )


def test_envelope_model_is_frozen_and_strict() -> None:
    env = Envelope(
        session_id="s", owner_id="o", meta={"archived": True}, created_at=1, updated_at=2
    )
    with pytest.raises(ValueError, match="frozen"):
        env.session_id = "t"
    with pytest.raises(ValueError, match="meta"):
        Envelope(session_id="s", owner_id="o", meta={"x": [1]}, created_at=1, updated_at=2)  # type: ignore[dict-item]
    assert env.host_meta() == {"archived": True}
    assert env.worker_meta() == {}


def test_envelope_working_notes_property_sanitizes() -> None:
    env = Envelope(
        session_id="s", owner_id="o", meta={"workingNotes": "  n  "}, created_at=1, updated_at=2
    )
    assert env.working_notes == "n"


# -- URLs ----------------------------------------------------------------------------------------


def test_memory_urls_with_the_same_name_share_envelopes() -> None:
    first = open_envelope_store("memory://shared-name-test")
    second = open_envelope_store("memory://shared-name-test")
    other = open_envelope_store("memory://another-name-test")
    assert isinstance(first, MemoryEnvelopeStore)
    first.create("s-url", "alice")
    assert second.get("s-url") is not None
    assert other.get("s-url") is None


def test_sqlite_url_opens_the_file(tmp_path: Path) -> None:
    path = tmp_path / "env.db"
    store = open_envelope_store(f"sqlite://{path}")
    try:
        assert isinstance(store, SqliteEnvelopeStore)
        store.create("s1", "alice")
    finally:
        store.close()
    assert path.exists()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://x", "unknown scheme 'redis'"),
        ("sqlite://relative.db", "sqlite:///absolute"),
        ("aws://", "table"),
        ("aws://?table=T&bucket=B", "unknown parameters"),
        ("aws://?table=A&table=B", "repeats"),
    ],
)
def test_bad_urls_are_rejected_with_a_clear_error(url: str, message: str) -> None:
    with pytest.raises(MetaValidationError, match=message):
        open_envelope_store(url)


def test_turn_accessors_read_the_status_and_run_id_and_drop_what_is_not_a_status() -> None:
    from turnkeep.envelope import status_of_turn, turn_run_id, turn_status

    meta = {"turnStatus": "awaiting_approval", "turnRunId": "op-1"}
    assert turn_status(meta) == "awaiting_approval"
    assert turn_run_id(meta) == "op-1"
    assert status_of_turn(meta, "op-1") == "awaiting_approval"
    assert status_of_turn(meta, "op-2") is None
    assert turn_status({"turnStatus": "sleeping"}) is None
    assert turn_status({}) is None
    assert turn_run_id({"turnRunId": 7}) is None


def test_the_delete_marker_is_written_once_and_is_never_a_valid_turn_id() -> None:
    from turnkeep.turn_rules import DELETE_MARKER, op_id_problem

    assert op_id_problem(DELETE_MARKER) is not None


def test_the_turn_keys_are_read_only_through_the_envelope_accessors() -> None:
    root = Path(__file__).resolve().parents[2] / "shared" / "turnkeep"
    raw = ('.get("turnStatus")', '.get("turnRunId")', '["turnStatus"]', '["turnRunId"]')
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name != "keys.py" and any(r in path.read_text(encoding="utf-8") for r in raw)
    ]
    assert offenders == []
