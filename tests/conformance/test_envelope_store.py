"""One envelope-store suite, run on every backend: memory, SQLite, DynamoDB (moto)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.envelope_backends import (
    BACKEND_NAMES,
    EnvelopeBackend,
    envelope_backend,
)
from turnkeep.envelope import (
    HOST_META_KEYS,
    WORKER_META_KEYS,
    EnvelopeClosedError,
    EnvelopeConflictError,
    EnvelopeExistsError,
    EnvelopeNotFoundError,
    EnvelopeStore,
    MetaScalar,
    MetaValidationError,
    caps,
)
from turnkeep.session_ids import SESSION_ID_MAX_LENGTH

HOST = {"title": "Trip plan", "selectedModel": "scripted", "reasoningEffort": "low"}


@pytest.fixture(params=BACKEND_NAMES)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvelopeBackend]:
    """Each test runs once per envelope backend."""
    with envelope_backend(request.param, tmp_path) as harness:
        yield harness


@pytest.fixture
def store(stores: EnvelopeBackend) -> EnvelopeStore:
    """A handle on the stores."""
    return stores.store()


# -- create / get / list / delete ----------------------------------------------------------------


def test_created_envelope_reads_back_with_owner_meta_and_equal_timestamps(
    stores: EnvelopeBackend, store: EnvelopeStore
) -> None:
    created = store.create("s1", "alice", HOST)
    got = store.get("s1")
    assert got == created
    assert got is not None
    assert (got.session_id, got.owner_id, got.meta) == ("s1", "alice", HOST)
    assert got.created_at == got.updated_at == stores.clock.now


def test_creating_an_existing_session_raises_exists_and_keeps_the_first(
    store: EnvelopeStore,
) -> None:
    store.create("s1", "alice", {"title": "first"})
    with pytest.raises(EnvelopeExistsError):
        store.create("s1", "bob", {"title": "second"})
    got = store.get("s1")
    assert got is not None
    assert (got.owner_id, got.meta) == ("alice", {"title": "first"})


def test_create_rejects_worker_keys_in_the_host_meta(store: EnvelopeStore) -> None:
    with pytest.raises(MetaValidationError, match="workingNotes"):
        store.create("s1", "alice", {"workingNotes": "forged"})
    with pytest.raises(MetaValidationError, match="turnStatus"):
        store.create("s1", "alice", {"turnStatus": "running"})
    assert store.get("s1") is None


def test_missing_session_reads_as_none(store: EnvelopeStore) -> None:
    assert store.get("nope") is None
    assert store.get_for_owner("alice", "nope") is None


def test_another_owners_session_reads_as_none_for_owner(store: EnvelopeStore) -> None:
    store.create("s1", "alice")
    assert store.get_for_owner("bob", "s1") is None
    found = store.get_for_owner("alice", "s1")
    assert found is not None
    assert found.owner_id == "alice"


def test_list_for_owner_returns_only_that_owners_envelopes_oldest_first(
    stores: EnvelopeBackend, store: EnvelopeStore
) -> None:
    store.create("b", "alice")
    stores.clock.now += 10
    store.create("a", "alice")
    store.create("c", "bob")
    stores.clock.now += 10
    store.create("d", "alice")
    assert [e.session_id for e in store.list_for_owner("alice")] == ["b", "a", "d"]
    assert [e.session_id for e in store.list_for_owner("bob")] == ["c"]
    assert store.list_for_owner("carol") == []


def test_local_backends_list_every_session_id_and_dynamodb_declines_the_scan(
    stores: EnvelopeBackend, store: EnvelopeStore
) -> None:
    store.create("s-b", "alice")
    store.create("s-a", "bob")

    listed = store.local_session_ids()

    if stores.name == "dynamodb":
        assert listed is None  # a table Scan: the local start-up scan does not use it
    else:
        assert listed == ["s-a", "s-b"]


def test_delete_removes_the_envelope_and_the_id_can_be_created_again(
    store: EnvelopeStore,
) -> None:
    store.create("s1", "alice", HOST)
    store.delete("s1")
    assert store.get("s1") is None
    assert store.list_for_owner("alice") == []
    store.delete("s1")  # deleting what is gone is fine
    again = store.create("s1", "alice")
    assert again.meta == {}


def test_a_second_handle_sees_what_the_first_wrote(stores: EnvelopeBackend) -> None:
    first = stores.store()
    first.create("s1", "alice", HOST)
    first.update_worker_meta("s1", {"workingNotes": "keep me"})
    first.close()
    got = stores.store().get("s1")
    assert got is not None
    assert got.meta == {**HOST, "workingNotes": "keep me"}


def test_closed_store_rejects_calls_and_close_is_idempotent(store: EnvelopeStore) -> None:
    store.create("s1", "alice")
    store.close()
    store.close()
    with pytest.raises(EnvelopeClosedError):
        store.get("s1")
    with pytest.raises(EnvelopeClosedError):
        store.update_worker_meta("s1", {"turnStatus": "idle"})


@pytest.mark.parametrize("bad", ["", "a\x00b", "line\nbreak", "x" * 257, "\ud800", 7])
def test_invalid_session_id_is_rejected_before_anything_is_written(
    store: EnvelopeStore, bad: object
) -> None:
    with pytest.raises(MetaValidationError, match="session id"):
        store.create(bad, "alice")  # type: ignore[arg-type]


def test_values_keep_their_scalar_types_and_unicode(store: EnvelopeStore) -> None:
    store.create("s1", "alice", {"archived": True, "title": "Überfahrt — 旅程 🚢"})
    store.update_worker_meta("s1", {"turnStreamCursor": 42, "turnStepCount": 0})
    got = store.get("s1")
    assert got is not None
    assert got.meta["archived"] is True
    assert got.meta["title"] == "Überfahrt — 旅程 🚢"
    assert type(got.meta["turnStreamCursor"]) is int
    assert got.meta["turnStreamCursor"] == 42
    assert type(got.meta["turnStepCount"]) is int


def test_envelope_with_every_key_at_its_cap_round_trips(store: EnvelopeStore) -> None:
    skill = "s" * (caps.ATTACHED_SKILLS_MAX_BYTES - 4)
    host: dict[str, MetaScalar] = {
        "title": "t" * caps.TITLE_MAX_BYTES,
        "personaId": "p" * caps.IDENT_MAX_BYTES,
        "personaSnapshot": "é" * (caps.PERSONA_SNAPSHOT_MAX_BYTES // 2),
        "attachedSkills": json.dumps([skill]),
        "selectedModel": "m" * caps.IDENT_MAX_BYTES,
        "reasoningEffort": "medium",
        "archived": False,
        "toolApproval": "a" * caps.IDENT_MAX_BYTES,
    }
    worker: dict[str, MetaScalar] = {
        "workingNotes": "n" * caps.WORKING_NOTES_MAX_BYTES,
        "usage": json.dumps({"pad": "u" * (caps.USAGE_MAX_BYTES - 12)}),
        "turnError": "e" * caps.TURN_ERROR_MAX_BYTES,
        "turnRunId": "r" * caps.IDENT_MAX_BYTES,
        "turnFinishing": "f" * caps.IDENT_MAX_BYTES,
        "turnStreamCursor": "c" * caps.IDENT_MAX_BYTES,
        "turnStatus": "cancelling",
        "turnStartedAt": 2**63 - 1,
        "turnFinishedAt": 2**63 - 1,
        "turnStepCount": 2**63 - 1,
        "turnRateWindowStartedAt": 2**63 - 1,
        "turnRateWindowCount": 2**63 - 1,
        "parentSessionId": "p" * SESSION_ID_MAX_LENGTH,
    }
    assert set(host) == HOST_META_KEYS
    assert set(worker) == WORKER_META_KEYS
    sid, owner = "s" * SESSION_ID_MAX_LENGTH, "o" * caps.OWNER_ID_MAX_BYTES
    store.create(sid, owner, host)
    store.update_worker_meta(sid, worker)
    got = store.get_for_owner(owner, sid)
    assert got is not None
    assert got.meta == {**host, **worker}


# -- host PUT ------------------------------------------------------------------------------------


def test_host_put_replaces_the_full_host_set_and_absent_keys_clear(
    store: EnvelopeStore,
) -> None:
    store.create("s1", "alice", HOST)
    after = store.put_host_meta("s1", "alice", {"title": "Renamed", "archived": True})
    assert after.meta == {"title": "Renamed", "archived": True}
    assert store.get("s1") == after


def test_host_put_never_touches_worker_keys(store: EnvelopeStore) -> None:
    store.create("s1", "alice", HOST)
    store.update_worker_meta("s1", {"workingNotes": "finding A", "turnStatus": "running"})
    store.put_host_meta("s1", "alice", {})
    got = store.get("s1")
    assert got is not None
    assert got.meta == {"workingNotes": "finding A", "turnStatus": "running"}


def test_host_put_that_sets_working_notes_is_rejected_and_changes_nothing(
    store: EnvelopeStore,
) -> None:
    before = store.create("s1", "alice", HOST)
    with pytest.raises(MetaValidationError, match=r"workingNotes.*working_notes_\* tools"):
        store.put_host_meta("s1", "alice", {"title": "x", "workingNotes": "forged"})
    assert store.get("s1") == before


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"turnStatus": "idle"}, "'turnStatus' is owned by the turn worker"),
        ({"colour": "red"}, "unknown meta key 'colour'"),
        ({"title": ["a"]}, "'title'.*must be a string"),
        ({"title": {"a": 1}}, "'title'.*must be a string"),
        ({"archived": "yes"}, "'archived'.*boolean"),
        ({"reasoningEffort": "extreme"}, "'reasoningEffort'.*one of"),
        ({"attachedSkills": "not json"}, "'attachedSkills'.*JSON"),
        ({"attachedSkills": json.dumps([1, 2])}, "'attachedSkills'.*array of strings"),
        ({"title": "t" * (caps.TITLE_MAX_BYTES + 1)}, "'title'.*cap is 1024"),
        (
            {"personaSnapshot": "p" * (caps.PERSONA_SNAPSHOT_MAX_BYTES + 1)},
            "'personaSnapshot'.*cap",
        ),
    ],
)
def test_host_put_rejects_bad_meta_with_an_error_naming_the_key(
    store: EnvelopeStore, meta: dict[str, object], message: str
) -> None:
    before = store.create("s1", "alice", HOST)
    with pytest.raises(MetaValidationError, match=message):
        store.put_host_meta("s1", "alice", meta)  # type: ignore[arg-type]
    assert store.get("s1") == before


def test_host_put_by_another_owner_is_not_found_and_changes_nothing(
    store: EnvelopeStore,
) -> None:
    before = store.create("s1", "alice", HOST)
    with pytest.raises(EnvelopeNotFoundError):
        store.put_host_meta("s1", "mallory", {"title": "pwned"})
    assert store.get("s1") == before


def test_host_put_on_a_missing_session_is_not_found(store: EnvelopeStore) -> None:
    with pytest.raises(EnvelopeNotFoundError):
        store.put_host_meta("ghost", "alice", HOST)
    assert store.get("ghost") is None


# -- worker writes -------------------------------------------------------------------------------


def test_worker_write_touches_only_the_keys_it_names(store: EnvelopeStore) -> None:
    store.create("s1", "alice", HOST)
    store.update_worker_meta("s1", {"turnStatus": "running", "turnRunId": "op-1"})
    after = store.update_worker_meta("s1", {"workingNotes": "plan: ask for dates"})
    assert after.meta == {
        **HOST,
        "turnStatus": "running",
        "turnRunId": "op-1",
        "workingNotes": "plan: ask for dates",
    }


def test_worker_none_unsets_a_key_and_leaves_the_rest(store: EnvelopeStore) -> None:
    store.create("s1", "alice", HOST)
    store.update_worker_meta("s1", {"turnStatus": "failed", "turnError": "boom"})
    after = store.update_worker_meta("s1", {"turnError": None})
    assert after.meta == {**HOST, "turnStatus": "failed"}


@pytest.mark.parametrize("cleared", ["", "   \n\t "])
def test_worker_present_empty_notes_clear_the_notes(store: EnvelopeStore, cleared: str) -> None:
    store.create("s1", "alice")
    store.update_worker_meta("s1", {"workingNotes": "x"})
    after = store.update_worker_meta("s1", {"workingNotes": cleared})
    assert "workingNotes" not in after.meta


def test_worker_notes_are_stored_trimmed(store: EnvelopeStore) -> None:
    store.create("s1", "alice")
    after = store.update_worker_meta("s1", {"workingNotes": "\n  finding  \n"})
    assert after.meta["workingNotes"] == "finding"


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"title": "x"}, "'title' is owned by the host"),
        ({"bogus": 1}, "unknown meta key 'bogus'"),
        ({"turnStatus": "sleeping"}, "'turnStatus'.*one of"),
        ({"turnStepCount": True}, "'turnStepCount'.*integer"),
        ({"turnStepCount": -1}, "'turnStepCount'.*between"),
        ({"turnStartedAt": 1.5}, "'turnStartedAt'.*integer"),
        ({"turnStepCount": float("nan")}, "'turnStepCount'.*integer"),
        ({"usage": "[1]"}, "'usage'.*JSON object"),
        ({"turnRunId": ["a"]}, "'turnRunId'.*string"),
        ({"workingNotes": 5}, "'workingNotes'.*string"),
        ({"workingNotes": "n" * (caps.WORKING_NOTES_MAX_BYTES + 1)}, "'workingNotes'.*32768"),
    ],
)
def test_worker_write_rejects_bad_patches_with_an_error_naming_the_key(
    store: EnvelopeStore, patch: dict[str, object], message: str
) -> None:
    before = store.create("s1", "alice", HOST)
    with pytest.raises(MetaValidationError, match=message):
        store.update_worker_meta("s1", patch)  # type: ignore[arg-type]
    assert store.get("s1") == before


def test_worker_write_on_a_missing_session_is_not_found(store: EnvelopeStore) -> None:
    with pytest.raises(EnvelopeNotFoundError):
        store.update_worker_meta("ghost", {"turnStatus": "idle"})
    assert store.get("ghost") is None


def test_worker_write_with_a_foreign_owner_is_not_found_and_changes_nothing(
    store: EnvelopeStore,
) -> None:
    before = store.create("s1", "alice")
    with pytest.raises(EnvelopeNotFoundError):
        store.update_worker_meta("s1", {"workingNotes": "x"}, owner_id="mallory")
    assert store.get("s1") == before
    after = store.update_worker_meta("s1", {"workingNotes": "x"}, owner_id="alice")
    assert after.meta == {"workingNotes": "x"}


# -- compare-and-set -----------------------------------------------------------------------------


def test_expect_applies_the_patch_when_the_current_value_is_allowed(
    store: EnvelopeStore,
) -> None:
    store.create("s1", "alice")
    started = store.update_worker_meta(
        "s1", {"turnStatus": "running"}, expect={"turnStatus": {None, "idle", "completed"}}
    )
    assert started.meta["turnStatus"] == "running"


def test_expect_mismatch_raises_conflict_and_writes_nothing(store: EnvelopeStore) -> None:
    store.create("s1", "alice")
    before = store.update_worker_meta("s1", {"turnStatus": "running", "turnRunId": "op-1"})
    with pytest.raises(EnvelopeConflictError, match="turnStatus"):
        store.update_worker_meta(
            "s1",
            {"turnStatus": "running", "turnRunId": "op-2"},
            expect={"turnStatus": [None, "idle", "completed", "failed", "aborted"]},
        )
    assert store.get("s1") == before


def test_expect_none_matches_only_an_unset_key(store: EnvelopeStore) -> None:
    store.create("s1", "alice")
    store.update_worker_meta("s1", {"turnRunId": "op-1"}, expect={"turnRunId": [None]})
    with pytest.raises(EnvelopeConflictError):
        store.update_worker_meta("s1", {"turnRunId": "op-2"}, expect={"turnRunId": [None]})


def test_expect_compares_types_strictly(store: EnvelopeStore) -> None:
    store.create("s1", "alice")
    store.update_worker_meta("s1", {"turnStepCount": 1})
    with pytest.raises(EnvelopeConflictError):
        store.update_worker_meta("s1", {"turnStepCount": 2}, expect={"turnStepCount": [True]})
    after = store.update_worker_meta("s1", {"turnStepCount": 2}, expect={"turnStepCount": [1]})
    assert after.meta["turnStepCount"] == 2


def test_expect_on_several_keys_needs_all_of_them(store: EnvelopeStore) -> None:
    store.create("s1", "alice", {"selectedModel": "a"})
    store.update_worker_meta("s1", {"turnStatus": "running", "turnRunId": "op-1"})
    with pytest.raises(EnvelopeConflictError):
        store.update_worker_meta(
            "s1",
            {"turnStatus": "cancelling"},
            expect={"turnStatus": ["running"], "turnRunId": ["op-2"]},
        )
    after = store.update_worker_meta(
        "s1",
        {"turnStatus": "cancelling"},
        expect={"turnStatus": ["running"], "turnRunId": ["op-1"], "selectedModel": ["a"]},
    )
    assert after.meta["turnStatus"] == "cancelling"


@pytest.mark.parametrize(
    ("expect", "message"),
    [
        ({"turnStatus": []}, "empty"),
        ({"turnStatus": "running"}, "collection"),
        ({"nope": [None]}, "unknown meta key"),
        ({"turnStatus": [["x"]]}, "scalars"),
    ],
)
def test_malformed_expect_is_rejected(
    store: EnvelopeStore, expect: dict[str, object], message: str
) -> None:
    store.create("s1", "alice")
    with pytest.raises(MetaValidationError, match=message):
        store.update_worker_meta("s1", {"turnStatus": "idle"}, expect=expect)  # type: ignore[arg-type]


# -- updatedAt discipline ------------------------------------------------------------------------


def test_updated_at_is_strictly_newer_even_when_the_clock_stands_still_or_goes_back(
    stores: EnvelopeBackend, store: EnvelopeStore
) -> None:
    created = store.create("s1", "alice")
    stamps = [created.updated_at]
    stamps.append(store.update_worker_meta("s1", {"turnStatus": "running"}).updated_at)
    stamps.append(store.put_host_meta("s1", "alice", HOST).updated_at)
    stores.clock.now -= 60_000  # another writer's clock is a minute behind
    stamps.append(store.update_worker_meta("s1", {"workingNotes": "n"}).updated_at)
    stamps.append(store.put_host_meta("s1", "alice", {}).updated_at)
    assert stamps == sorted(set(stamps))
    assert len(stamps) == 5
    assert store.get("s1").created_at == created.created_at  # type: ignore[union-attr]


def test_updated_at_follows_the_clock_when_it_is_ahead(
    stores: EnvelopeBackend, store: EnvelopeStore
) -> None:
    store.create("s1", "alice")
    stores.clock.now += 5_000
    assert store.update_worker_meta("s1", {"turnStepCount": 1}).updated_at == stores.clock.now


# -- poison --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("workingNotes", "n" * (caps.WORKING_NOTES_MAX_BYTES + 1)),
        ("workingNotes", 12),
        ("workingNotes", ["a", "b"]),
        ("workingNotes", {"nested": "map"}),
        ("turnStatus", "sleeping"),
        ("turnStepCount", "three"),
        ("turnStepCount", True),
        ("usage", "not json"),
        ("attachedSkills", '{"not": "an array"}'),
        ("archived", "yes"),
        ("title", None),
        ("legacyKey", "from an older release"),
    ],
)
def test_poison_stored_values_read_back_as_unset_and_never_crash_a_read(
    stores: EnvelopeBackend, store: EnvelopeStore, key: str, value: object
) -> None:
    store.create("s1", "alice", HOST)
    store.update_worker_meta("s1", {"turnStatus": "idle"})
    stores.poke_raw(store, "s1", key, value)
    expected = {**HOST, "turnStatus": "idle"}
    expected.pop(key, None)
    got = store.get("s1")
    assert got is not None
    assert got.meta == expected
    assert got.working_notes is None
    assert [e.meta for e in store.list_for_owner("alice")] == [expected]


def test_writes_still_work_on_an_envelope_holding_poison(
    stores: EnvelopeBackend, store: EnvelopeStore
) -> None:
    store.create("s1", "alice", HOST)
    stores.poke_raw(store, "s1", "workingNotes", {"bad": True})
    stores.poke_raw(store, "s1", "title", ["bad"])
    store.update_worker_meta("s1", {"workingNotes": "fresh"})
    after = store.put_host_meta("s1", "alice", {"title": "clean"})
    assert after.meta == {"title": "clean", "workingNotes": "fresh"}


def test_writes_still_work_when_the_stored_updated_at_is_poison(
    stores: EnvelopeBackend, store: EnvelopeStore
) -> None:
    store.create("s1", "alice", HOST)
    stores.poke_updated_at(store, "s1", "not a timestamp")
    assert store.get("s1").updated_at == 0  # type: ignore[union-attr]
    stores.clock.now += 1
    notes = store.update_worker_meta("s1", {"workingNotes": "still writable"})
    assert notes.updated_at == stores.clock.now
    after = store.put_host_meta("s1", "alice", {"title": "renamed"})
    assert after.meta == {"title": "renamed", "workingNotes": "still writable"}
    assert after.updated_at > notes.updated_at


@pytest.mark.parametrize("poison", ["sleeping", 7, ["running"], {"status": "running"}])
def test_expect_sees_a_poison_stored_value_as_unset_like_every_read(
    stores: EnvelopeBackend, store: EnvelopeStore, poison: object
) -> None:
    # A poisoned turnStatus reads back as unset; a compare-and-set must agree with that read,
    # or a session whose envelope shows no turn could never start one again.
    store.create("s1", "alice", HOST)
    stores.poke_raw(store, "s1", "turnStatus", poison)
    with pytest.raises(EnvelopeConflictError):
        store.update_worker_meta("s1", {"turnStatus": "running"}, expect={"turnStatus": ["idle"]})
    started = store.update_worker_meta(
        "s1", {"turnStatus": "running", "turnRunId": "op-1"}, expect={"turnStatus": [None, "idle"]}
    )
    assert started.meta == {**HOST, "turnStatus": "running", "turnRunId": "op-1"}
    assert store.get("s1") == started


@pytest.mark.parametrize(
    ("meta", "code", "field"),
    [
        ({"turnStatus": "idle"}, "worker_key", "turnStatus"),
        ({"workingNotes": "x"}, "worker_key", "workingNotes"),
        ({"colour": "red"}, "unknown_meta_key", "colour"),
        ({"title": ["a"]}, "invalid_meta", None),
    ],
)
def test_a_refused_host_put_says_why_with_a_code_and_the_key(
    store: EnvelopeStore, meta: dict[str, object], code: str, field: str | None
) -> None:
    store.create("s1", "alice", HOST)
    with pytest.raises(MetaValidationError) as refused:
        store.put_host_meta("s1", "alice", meta)  # type: ignore[arg-type]
    assert (refused.value.code, refused.value.field) == (code, field)


def test_the_suite_runs_on_every_envelope_store_the_package_ships() -> None:
    # A store added to turnkeep/envelope/ without a backend module here would go untested.
    import importlib
    import inspect
    import pkgutil

    import turnkeep.envelope as package

    shipped = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"turnkeep.envelope.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, EnvelopeStore) and cls is not EnvelopeStore:
                shipped.add(cls.__module__.rsplit(".", 1)[-1])
    assert shipped == set(BACKEND_NAMES)
