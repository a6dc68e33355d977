"""The handlers' Tracer: no X-Ray SDK import when tracing is off, the X-Ray recorder when on.

Each case imports a handler file in a fresh interpreter, as a Lambda cold start does (the
Powertools Tracer shares its configuration process-wide, so in-process checks would leak)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.lambda_host import ROOT

PROBE = r"""
import importlib.util, json, sys, types
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
tracer = module.tracer
recorded = []
if not tracer.disabled:
    # Tracing on: the handler decorator must open its subsegment on the X-Ray provider.
    class Recorded(Exception):
        pass
    def in_subsegment(name=None, **kwargs):
        recorded.append(name)
        raise Recorded()
    tracer.provider.in_subsegment = in_subsegment
    try:
        context = types.SimpleNamespace(
            function_name="f", memory_limit_in_mb=512, aws_request_id="r",
            invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:f",
        )
        getattr(module, sys.argv[2])({}, context)
    except Recorded:
        pass
print(json.dumps({
    "xray_core_imported": "aws_xray_sdk.core" in sys.modules,
    "disabled": tracer.disabled,
    "provider": type(tracer.provider).__module__,
    "recorded": recorded,
}))
"""

HANDLERS = [("functions/turn_steps/app.py", "model_step"), ("functions/api/app.py", "handler")]


def _probe(path: str, attribute: str, **env: str) -> dict[str, object]:
    environment = {
        **os.environ,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        **env,
    }
    for name in ("LAMBDA_TASK_ROOT", "AWS_SAM_LOCAL", "POWERTOOLS_TRACE_DISABLED"):
        if name not in env:
            environment.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / path), attribute],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(("path", "attribute"), HANDLERS)
def test_a_handler_with_tracing_disabled_never_imports_the_xray_sdk(
    path: str, attribute: str
) -> None:
    found = _probe(path, attribute, POWERTOOLS_TRACE_DISABLED="true", LAMBDA_TASK_ROOT="/var/task")
    assert found["disabled"] is True
    assert found["xray_core_imported"] is False


@pytest.mark.parametrize(("path", "attribute"), HANDLERS)
def test_a_handler_with_tracing_enabled_traces_through_the_xray_recorder(
    path: str, attribute: str
) -> None:
    found = _probe(path, attribute, POWERTOOLS_TRACE_DISABLED="false", LAMBDA_TASK_ROOT="/var/task")
    assert found["disabled"] is False
    assert found["xray_core_imported"] is True
    assert str(found["provider"]).startswith("aws_xray_sdk")
    recorded = found["recorded"]
    assert isinstance(recorded, list)
    assert len(recorded) == 1
    assert str(recorded[0]).startswith("## ")
