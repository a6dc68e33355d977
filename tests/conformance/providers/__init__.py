"""One module per model provider; each defines `make() -> ProviderHarness`.

The provider conformance suite (tests/conformance/test_provider_*.py) discovers every module
here, so a new provider joins the suite by adding its module and nothing else. Behind every
wire-level provider the scripted model answers, computed from the request as it arrived on the
wire, so the same user text asks every provider for the same reply or tool call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from turnkeep.providers.base import ModelProvider, ModelRequest, Usage

Failure = Literal["throttled", "unavailable", "auth", "context_overflow", "dropped"]
"""What a server can answer instead of a reply; the suite states the error each must become."""

FAILURES: tuple[Failure, ...] = ("throttled", "unavailable", "auth", "context_overflow", "dropped")


@dataclass
class Wire:
    """The server side of a wire-level provider: what it received and how it answers next."""

    received: Callable[[], list[ModelRequest]]
    """Every request as the server read it, mapped back to the neutral request."""
    fail_next: Callable[[Failure], None]
    """Answer the next request with this failure, as the real service sends it."""
    report_next: Callable[[Usage], None]
    """Report this usage with the next reply (as the real service reports usage)."""
    pace_next: Callable[[float], None]
    """Send the next reply's events this many seconds apart (a slow model)."""
    client_gone: Callable[[float], bool]
    """Wait up to the timeout for a client to close a stream before its end; True if it did."""


@dataclass
class ProviderHarness:
    """How the suite reaches one provider (and, for wire-level ones, its server)."""

    name: str
    provider: ModelProvider
    wire: Wire | None = None
    close: Callable[[], None] = field(default=lambda: None)


ProviderFactory = Callable[[], ProviderHarness]


class NextAnswer:
    """What a wire server's next answer should be: a failure, the usage to report, a pace.
    Each setting applies to one answer; `take` hands them over and clears them."""

    def __init__(self) -> None:
        self.failure: Failure | None = None
        self.usage: Usage | None = None
        self.pace = 0.0

    def take(self) -> tuple[Failure | None, Usage | None, float]:
        taken = (self.failure, self.usage, self.pace)
        self.failure, self.usage, self.pace = None, None, 0.0
        return taken

    def wire(
        self, received: Callable[[], list[ModelRequest]], client_gone: Callable[[float], bool]
    ) -> Wire:
        """The suite's view of a server answering through this."""
        return Wire(
            received=received,
            fail_next=self._fail,
            report_next=self._report,
            pace_next=self._slow,
            client_gone=client_gone,
        )

    def _fail(self, failure: Failure) -> None:
        self.failure = failure

    def _report(self, usage: Usage) -> None:
        self.usage = usage

    def _slow(self, seconds: float) -> None:
        self.pace = seconds
