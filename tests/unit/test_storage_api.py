"""Constructor-level behaviour of the storage API (backend-independent)."""

from __future__ import annotations

import pytest

from turnkeep.storage import (
    SESSION_SCOPE,
    InvalidScopeError,
    StorageError,
    StorageValidationError,
    TransactionScopeError,
    append_list,
    ephemeral_scope,
    open_storage,
    retire_scope,
    set_value,
    value,
    value_list,
)


def test_ephemeral_scopes_with_equal_ids_are_the_same_scope() -> None:
    assert ephemeral_scope("op-1") == ephemeral_scope("op-1")
    assert value("ns", "k", ephemeral_scope("op-1")) == value("ns", "k", ephemeral_scope("op-1"))


@pytest.mark.parametrize("bad", ["", "\ud800", "x" * 181, "é" * 31])
def test_ephemeral_scope_rejects_empty_lone_surrogate_and_overlong_ids(bad: str) -> None:
    with pytest.raises(InvalidScopeError):
        ephemeral_scope(bad)


def test_ephemeral_scope_accepts_an_id_that_encodes_to_exactly_180_characters() -> None:
    assert ephemeral_scope("é" * 30).id == "é" * 30  # 30 x "%C3%A9" = 180 characters


def test_validation_errors_are_storage_errors_and_value_errors() -> None:
    with pytest.raises(StorageError):
        ephemeral_scope("")
    with pytest.raises(ValueError, match="empty"):
        ephemeral_scope("")


def test_retiring_the_session_scope_is_rejected() -> None:
    with pytest.raises(TransactionScopeError, match="session scope"):
        retire_scope(SESSION_SCOPE)


def test_empty_list_tag_is_rejected() -> None:
    with pytest.raises(StorageValidationError, match="tag"):
        append_list(value_list("frames"), {"t": 1}, tag="")


def test_non_json_values_are_rejected_naming_the_address() -> None:
    with pytest.raises(StorageValidationError, match="'cfg'"):
        set_value(value("cfg"), {1, 2})


def test_unknown_storage_url_scheme_is_rejected_with_the_known_schemes() -> None:
    with pytest.raises(StorageValidationError, match="sqlite://"):
        open_storage("redis://localhost", "s1")


@pytest.mark.parametrize("bad", ["", "\ud800", "x" * 181])
def test_an_ephemeral_scope_built_directly_still_rejects_unusable_ids(bad: str) -> None:
    from turnkeep.storage import EphemeralScope

    with pytest.raises(InvalidScopeError):
        EphemeralScope(bad)
