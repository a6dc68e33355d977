"""The scripted provider in the provider conformance suite: in-process, no wire."""

from __future__ import annotations

from tests.conformance.providers import ProviderHarness
from turnkeep.providers.scripted import ScriptedProvider


def make() -> ProviderHarness:
    return ProviderHarness("scripted", ScriptedProvider())


WIRELESS = True
"""No server behind it: the wire-level tests (errors, usage reported, abandoned streams) do not
apply and are deselected for it."""
