"""The handlers' Powertools Tracer, without the X-Ray SDK when tracing is off.

`Tracer()` imports `aws_xray_sdk.core` (0.1-0.3 s of every cold start) even when tracing is
disabled, because its default provider is the X-Ray recorder. When Powertools' own rules say
tracing is off (`POWERTOOLS_TRACE_DISABLED`, SAM local, outside Lambda), the Tracer gets a
no-op provider instead; when tracing is on it is the stock Tracer on the X-Ray recorder.
"""

from __future__ import annotations

import contextlib
import numbers
import traceback
from collections.abc import AsyncGenerator, Generator, Sequence
from typing import Any

from aws_lambda_powertools import Tracer
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment


class _NoSegment(BaseSegment):
    """A segment that records nothing."""

    def close(self, end_time: int | None = None) -> None:
        """Nothing to close."""

    def add_subsegment(self, subsegment: Any) -> None:
        """Nothing is recorded."""

    def remove_subsegment(self, subsegment: Any) -> None:
        """Nothing is recorded."""

    def put_annotation(self, key: str, value: str | numbers.Number | bool) -> None:
        """Nothing is recorded."""

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        """Nothing is recorded."""

    def add_exception(
        self, exception: BaseException, stack: list[traceback.StackSummary], remote: bool = False
    ) -> None:
        """Nothing is recorded."""


class NoTracingProvider(BaseProvider):
    """The provider of a disabled Tracer: every call is a no-op, no X-Ray import."""

    @contextlib.contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Generator[BaseSegment]:
        """A subsegment that records nothing."""
        yield _NoSegment()

    @contextlib.asynccontextmanager
    async def in_subsegment_async(
        self, name: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[BaseSegment]:
        """A subsegment that records nothing."""
        yield _NoSegment()

    def put_annotation(self, key: str, value: str | numbers.Number | bool) -> None:
        """Nothing is recorded."""

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        """Nothing is recorded."""

    def patch(self, modules: Sequence[str]) -> None:
        """Nothing to patch."""

    def patch_all(self) -> None:
        """Nothing to patch."""


def tracing_enabled() -> bool:
    """Powertools' own decision (env var, SAM local, Chalice, outside Lambda)."""
    return not Tracer._is_tracer_disabled()


def lambda_tracer(service: str | None = None) -> Tracer:
    """The X-Ray Tracer when tracing is enabled, else a disabled one on a no-op provider.

    Without `service`, Powertools takes the template's `POWERTOOLS_SERVICE_NAME`.
    """
    if tracing_enabled():
        return Tracer(service=service)
    return Tracer(service=service, disabled=True, auto_patch=False, provider=NoTracingProvider())
