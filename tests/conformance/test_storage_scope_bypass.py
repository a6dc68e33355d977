"""Conformance: a scope id is validated however the scope object was made.

`EphemeralScope` is exported, so callers can build one without `ephemeral_scope(...)`. An empty
id must never alias the session scope (whose physical scope key is '') and must never reach a
file name or object key; it is rejected before anything is written.
"""

from __future__ import annotations

import pytest

from tests.conformance.backends import BackendHarness
from turnkeep.storage import EphemeralScope, InvalidScopeError, set_value, value


@pytest.mark.parametrize("bad", ["", "\ud800"])
def test_a_directly_built_scope_with_an_unusable_id_is_rejected_and_writes_nothing(
    backend: BackendHarness, bad: str
) -> None:
    storage = backend.open()
    with pytest.raises(InvalidScopeError):
        storage.commit([set_value(value("n", "k", EphemeralScope(bad)), "scoped")])
    assert storage.get_value(value("n", "k")) is None
    assert storage.commit([set_value(value("probe"), 1)]).seqs == (1,)
