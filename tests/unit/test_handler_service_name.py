"""The Lambda handlers take their Powertools service name from the template's
POWERTOOLS_SERVICE_NAME instead of overriding it in code."""

from __future__ import annotations

import gc
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("handler", ["functions/api/app.py", "functions/turn_steps/app.py"])
def test_a_handler_logs_and_measures_under_the_configured_service_name(
    handler: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "svc-from-template")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    # A client built at import makes no request, but needs a region.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    spec = importlib.util.spec_from_file_location(
        f"handler_{handler.split('/')[1]}", ROOT / handler
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gc.unfreeze()  # the handler froze this whole test process: keep its objects collectable

    assert module.logger.service == "svc-from-template"
    assert module.tracer.service == "svc-from-template"
    assert module.metrics.service == "svc-from-template"
