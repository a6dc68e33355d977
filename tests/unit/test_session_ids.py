"""One session-id rule for storage, the envelope store and the API (turnkeep.session_ids)."""

from __future__ import annotations

import re

import pytest

from turnkeep.envelope import MetaValidationError
from turnkeep.envelope.keys import validate_session_id as envelope_rule
from turnkeep.envelope.memory import MemoryEnvelopeStore
from turnkeep.session_ids import SESSION_ID_PATTERN
from turnkeep.storage import StorageValidationError
from turnkeep.storage import validate_session_id as storage_rule

IDS = [
    "s-1",
    "A.b_c:d-e",
    "x" * 128,
    "x" * 129,
    "a b/é",
    "-leading-dash",
    "",
    "tab\tid",
    "ünïcode",
    "s" * 256,
]


def _accepts(rule: object, error: type[Exception], value: str) -> bool:
    try:
        rule(value)  # type: ignore[operator]
    except error:
        return False
    return True


@pytest.mark.parametrize("session_id", IDS)
def test_storage_the_envelope_store_and_the_api_accept_the_same_session_ids(
    session_id: str,
) -> None:
    storage = _accepts(storage_rule, StorageValidationError, session_id)
    envelope = _accepts(envelope_rule, MetaValidationError, session_id)
    api = re.match(SESSION_ID_PATTERN, session_id) is not None

    assert storage == envelope == api


def test_an_envelope_for_an_id_storage_cannot_open_is_refused_naming_the_rule() -> None:
    store = MemoryEnvelopeStore()

    with pytest.raises(MetaValidationError, match="1-128 characters of A-Z a-z 0-9"):
        store.create("a b/é", "owner")
